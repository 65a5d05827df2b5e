// libmosquitto (Debian's libmosquitto-dev): the MQTT client library BLEMQTT
// wraps. Debian ships only the shared library (libmosquitto.so), so anything
// that links this module cannot be a fully static executable; see
// Sources/BLEMQTT/MQTTClient.swift.
#include <mosquitto.h>
