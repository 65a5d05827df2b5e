// libmosquitto loaded at run time, by the gateway only.
//
// The MQTT client (the MQTT target) calls libmosquitto's functions as declared in
// <mosquitto.h>; this target defines each of them as a trampoline that opens
// libmosquitto.so.1 with dlopen on first use and calls the real function. So
// the attled binary does not link libmosquitto (nor, through it, libssl,
// libcares, libcjson): a one-shot `--rgb` run never maps them, and only
// `attled gateway` loads them.
#ifndef ATTLED_MOSQUITTO_LOADER_H
#define ATTLED_MOSQUITTO_LOADER_H

/// Opens libmosquitto.so.1 (once). Returns 0, or -1 with the reason in
/// attled_mosquitto_error().
int attled_mosquitto_open(void);

/// dlopen's message when attled_mosquitto_open failed, else NULL.
const char *attled_mosquitto_error(void);

#endif
