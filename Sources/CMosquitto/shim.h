// libmosquitto's declarations (Debian's libmosquitto-dev): the MQTT client
// library MQTT wraps. Nothing links it: CMosquittoLoader opens
// libmosquitto.so.1 at run time, when the gateway first needs it, so a
// one-shot run never maps it (nor libssl through it).
#include <mosquitto.h>
#include <mqtt_protocol.h>
