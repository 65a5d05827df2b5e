// See include/mosquitto_loader.h. Every function MQTT uses is here; one it
// cannot find in the loaded library fails with MOSQ_ERR_NOT_SUPPORTED (or
// NULL / false / nothing), never a crash.
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <mosquitto.h>
#include "mosquitto_loader.h"

static void *library;
static const char *library_error;

int attled_mosquitto_open(void) {
    if (library) return 0;
    library = dlopen("libmosquitto.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) { library_error = dlerror(); return -1; }
    library_error = NULL;
    return 0;
}

const char *attled_mosquitto_error(void) { return library_error; }

static void *symbol(const char *name) {
    if (attled_mosquitto_open() != 0) return NULL;
    return dlsym(library, name);
}

// A trampoline: the real function, looked up once.
#define FORWARD(ret, name, params, args, failure)                  \
    ret name params {                                              \
        static ret (*real) params;                                 \
        if (!real) real = (ret (*) params)symbol(#name);           \
        if (!real) return failure;                                 \
        return real args;                                          \
    }
#define FORWARD_VOID(name, params, args)                           \
    void name params {                                             \
        static void (*real) params;                                \
        if (!real) real = (void (*) params)symbol(#name);          \
        if (real) real args;                                       \
    }

FORWARD(int, mosquitto_lib_init, (void), (), MOSQ_ERR_NOT_SUPPORTED)
FORWARD(struct mosquitto *, mosquitto_new, (const char *id, bool clean_session, void *obj), (id, clean_session, obj), NULL)
FORWARD_VOID(mosquitto_destroy, (struct mosquitto *m), (m))
FORWARD(int, mosquitto_connect_async, (struct mosquitto *m, const char *host, int port, int keepalive), (m, host, port, keepalive), MOSQ_ERR_NOT_SUPPORTED)
FORWARD(int, mosquitto_reconnect_async, (struct mosquitto *m), (m), MOSQ_ERR_NOT_SUPPORTED)
FORWARD(int, mosquitto_disconnect, (struct mosquitto *m), (m), MOSQ_ERR_NOT_SUPPORTED)
FORWARD_VOID(mosquitto_connect_callback_set, (struct mosquitto *m, void (*cb)(struct mosquitto *, void *, int)), (m, cb))
FORWARD_VOID(mosquitto_disconnect_callback_set, (struct mosquitto *m, void (*cb)(struct mosquitto *, void *, int)), (m, cb))
FORWARD_VOID(mosquitto_message_callback_set, (struct mosquitto *m, void (*cb)(struct mosquitto *, void *, const struct mosquitto_message *)), (m, cb))
FORWARD(int, mosquitto_int_option, (struct mosquitto *m, enum mosq_opt_t option, int value), (m, option, value), MOSQ_ERR_NOT_SUPPORTED)
FORWARD(int, mosquitto_loop_misc, (struct mosquitto *m), (m), MOSQ_ERR_NOT_SUPPORTED)
FORWARD(int, mosquitto_loop_read, (struct mosquitto *m, int max_packets), (m, max_packets), MOSQ_ERR_NOT_SUPPORTED)
FORWARD(int, mosquitto_loop_write, (struct mosquitto *m, int max_packets), (m, max_packets), MOSQ_ERR_NOT_SUPPORTED)
FORWARD(int, mosquitto_publish, (struct mosquitto *m, int *mid, const char *topic, int payloadlen, const void *payload, int qos, bool retain), (m, mid, topic, payloadlen, payload, qos, retain), MOSQ_ERR_NOT_SUPPORTED)
FORWARD(int, mosquitto_socket, (struct mosquitto *m), (m), -1)
FORWARD(const char *, mosquitto_strerror, (int code), (code), NULL)
FORWARD(const char *, mosquitto_connack_string, (int code), (code), NULL)
FORWARD(int, mosquitto_subscribe, (struct mosquitto *m, int *mid, const char *sub, int qos), (m, mid, sub, qos), MOSQ_ERR_NOT_SUPPORTED)
FORWARD(int, mosquitto_tls_set, (struct mosquitto *m, const char *cafile, const char *capath, const char *certfile, const char *keyfile, int (*pw)(char *, int, int, void *)), (m, cafile, capath, certfile, keyfile, pw), MOSQ_ERR_NOT_SUPPORTED)
FORWARD_VOID(mosquitto_user_data_set, (struct mosquitto *m, void *obj), (m, obj))
FORWARD(int, mosquitto_username_pw_set, (struct mosquitto *m, const char *username, const char *password), (m, username, password), MOSQ_ERR_NOT_SUPPORTED)
FORWARD(bool, mosquitto_want_write, (struct mosquitto *m), (m), false)
FORWARD(int, mosquitto_will_set, (struct mosquitto *m, const char *topic, int payloadlen, const void *payload, int qos, bool retain), (m, topic, payloadlen, payload, qos, retain), MOSQ_ERR_NOT_SUPPORTED)
// MQTT v5 (libmosquitto 1.6 and later): properties on PUBLISH and the will.
FORWARD(int, mosquitto_publish_v5, (struct mosquitto *m, int *mid, const char *topic, int payloadlen, const void *payload, int qos, bool retain, const mosquitto_property *props), (m, mid, topic, payloadlen, payload, qos, retain, props), MOSQ_ERR_NOT_SUPPORTED)
FORWARD(int, mosquitto_will_set_v5, (struct mosquitto *m, const char *topic, int payloadlen, const void *payload, int qos, bool retain, mosquitto_property *props), (m, topic, payloadlen, payload, qos, retain, props), MOSQ_ERR_NOT_SUPPORTED)
FORWARD(int, mosquitto_property_add_int32, (mosquitto_property **props, int identifier, uint32_t value), (props, identifier, value), MOSQ_ERR_NOT_SUPPORTED)
FORWARD_VOID(mosquitto_property_free_all, (mosquitto_property **props), (props))
FORWARD(const char *, mosquitto_reason_string, (int code), (code), NULL)
