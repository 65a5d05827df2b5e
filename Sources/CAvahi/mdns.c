// See include/attled_mdns.h.
//
// The few avahi-client and avahi-common functions used are declared here,
// from their public ABI (avahi-client/client.h, publish.h, avahi-common/
// thread-watch.h, strlst.h, alternative.h, error.h of avahi 0.8, the same
// since 0.6), so the build needs no avahi headers; the library is opened
// with dlopen on the first announcement. The fully static build has no
// dlopen: there the announcement fails with a clear error.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "attled_mdns.h"

#ifndef ATTLED_NO_DLOPEN
#include <dlfcn.h>
#endif

// --- the ABI used (opaque types, enums as int) -----------------------------
typedef struct AvahiThreadedPoll AvahiThreadedPoll;
typedef struct AvahiPoll AvahiPoll;
typedef struct AvahiClient AvahiClient;
typedef struct AvahiEntryGroup AvahiEntryGroup;
typedef struct AvahiStringList AvahiStringList;
typedef void (*AvahiClientCallback)(AvahiClient *, int state, void *userdata);
typedef void (*AvahiEntryGroupCallback)(AvahiEntryGroup *, int state, void *userdata);

enum { CLIENT_S_REGISTERING = 1, CLIENT_S_RUNNING = 2, CLIENT_S_COLLISION = 3, CLIENT_FAILURE = 100, CLIENT_CONNECTING = 101 };
enum { GROUP_UNCOMMITED = 0, GROUP_REGISTERING = 1, GROUP_ESTABLISHED = 2, GROUP_COLLISION = 3, GROUP_FAILURE = 4 };
enum { CLIENT_NO_FAIL = 2 };  // AVAHI_CLIENT_NO_FAIL: wait for a daemon that is (re)starting
#define IF_UNSPEC (-1)
#define PROTO_UNSPEC (-1)

static struct {
    AvahiThreadedPoll *(*poll_new)(void);
    const AvahiPoll *(*poll_get)(AvahiThreadedPoll *);
    int (*poll_start)(AvahiThreadedPoll *);
    int (*poll_stop)(AvahiThreadedPoll *);
    void (*poll_free)(AvahiThreadedPoll *);
    AvahiClient *(*client_new)(const AvahiPoll *, int flags, AvahiClientCallback, void *, int *error);
    void (*client_free)(AvahiClient *);
    int (*client_errno)(AvahiClient *);
    AvahiEntryGroup *(*group_new)(AvahiClient *, AvahiEntryGroupCallback, void *);
    int (*group_add)(AvahiEntryGroup *, int iface, int proto, int flags, const char *name, const char *type,
                     const char *domain, const char *host, uint16_t port, AvahiStringList *txt);
    int (*group_commit)(AvahiEntryGroup *);
    int (*group_reset)(AvahiEntryGroup *);
    AvahiStringList *(*strlst_new)(const char **array, int length);
    void (*strlst_free)(AvahiStringList *);
    char *(*alternative_name)(const char *);
    void (*free_)(void *);
    const char *(*strerror_)(int);
} av;

static int loaded;

static int load(char *error) {
    if (loaded) return 0;
#ifdef ATTLED_NO_DLOPEN
    snprintf(error, 256, "this attled is fully static and cannot load libavahi-client");
    return -1;
#else
    void *client = dlopen("libavahi-client.so.3", RTLD_NOW | RTLD_LOCAL);
    void *common = dlopen("libavahi-common.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!client || !common) {
        snprintf(error, 256, "cannot load libavahi-client.so.3 (%s): apt-get install libavahi-client3 avahi-daemon", dlerror());
        return -1;
    }
#define SYM(lib, field, name) if (!(*(void **)&av.field = dlsym(lib, name))) { snprintf(error, 256, "libavahi has no %s", name); return -1; }
    SYM(common, poll_new, "avahi_threaded_poll_new")
    SYM(common, poll_get, "avahi_threaded_poll_get")
    SYM(common, poll_start, "avahi_threaded_poll_start")
    SYM(common, poll_stop, "avahi_threaded_poll_stop")
    SYM(common, poll_free, "avahi_threaded_poll_free")
    SYM(client, client_new, "avahi_client_new")
    SYM(client, client_free, "avahi_client_free")
    SYM(client, client_errno, "avahi_client_errno")
    SYM(client, group_new, "avahi_entry_group_new")
    SYM(client, group_add, "avahi_entry_group_add_service_strlst")
    SYM(client, group_commit, "avahi_entry_group_commit")
    SYM(client, group_reset, "avahi_entry_group_reset")
    SYM(common, strlst_new, "avahi_string_list_new_from_array")
    SYM(common, strlst_free, "avahi_string_list_free")
    SYM(common, alternative_name, "avahi_alternative_service_name")
    SYM(common, free_, "avahi_free")
    SYM(common, strerror_, "avahi_strerror")
#undef SYM
    loaded = 1;
    return 0;
#endif
}

struct attled_mdns {
    AvahiThreadedPoll *poll;
    AvahiClient *client;
    AvahiEntryGroup *group;
    AvahiStringList *txt;
    char *name;
    char *type;
    uint16_t port;
    // Read from the caller's thread: under `lock`.
    pthread_mutex_t lock;
    int state;
    char error[256];
};

static void set_state(attled_mdns *m, int state, const char *why) {
    pthread_mutex_lock(&m->lock);
    m->state = state;
    if (why) snprintf(m->error, sizeof m->error, "%s", why);
    pthread_mutex_unlock(&m->lock);
}

static void create_service(attled_mdns *m, AvahiClient *c);

// Avahi's thread: the group's fate.
static void group_callback(AvahiEntryGroup *g, int state, void *userdata) {
    attled_mdns *m = userdata;
    switch (state) {
    case GROUP_ESTABLISHED:
        set_state(m, ATTLED_MDNS_ESTABLISHED, NULL);
        break;
    case GROUP_COLLISION: {
        // Another host announces this name: take avahi's alternative ("name #2").
        char *alt = av.alternative_name(m->name);
        pthread_mutex_lock(&m->lock);
        free(m->name);
        m->name = strdup(alt);
        pthread_mutex_unlock(&m->lock);
        av.free_(alt);
        av.group_reset(g);
        create_service(m, NULL);
        break;
    }
    case GROUP_FAILURE:
        set_state(m, ATTLED_MDNS_FAILED, av.strerror_(av.client_errno(m->client)));
        break;
    default:
        break;
    }
}

static void create_service(attled_mdns *m, AvahiClient *c) {
    if (!m->group) m->group = av.group_new(c ? c : m->client, group_callback, m);
    if (!m->group) { set_state(m, ATTLED_MDNS_FAILED, av.strerror_(av.client_errno(c ? c : m->client))); return; }
    set_state(m, ATTLED_MDNS_STARTING, NULL);
    int r = av.group_add(m->group, IF_UNSPEC, PROTO_UNSPEC, 0, m->name, m->type, NULL, NULL, m->port, m->txt);
    if (r >= 0) r = av.group_commit(m->group);
    if (r < 0) set_state(m, ATTLED_MDNS_FAILED, av.strerror_(r));
}

// Avahi's thread: the daemon's side.
static void client_callback(AvahiClient *c, int state, void *userdata) {
    attled_mdns *m = userdata;
    switch (state) {
    case CLIENT_S_RUNNING:
        create_service(m, c);
        break;
    case CLIENT_S_COLLISION:
    case CLIENT_S_REGISTERING:
        // The host name is being (re)registered: announce again once running.
        if (m->group) av.group_reset(m->group);
        set_state(m, ATTLED_MDNS_STARTING, NULL);
        break;
    case CLIENT_FAILURE:
        set_state(m, ATTLED_MDNS_FAILED, av.strerror_(av.client_errno(c)));
        break;
    default:
        break;
    }
}

attled_mdns *attled_mdns_publish(const char *name, const char *type, uint16_t port,
                                 const char **txt, int count, char *error) {
    error[0] = 0;
    if (load(error) != 0) return NULL;
    attled_mdns *m = calloc(1, sizeof *m);
    if (!m) { snprintf(error, 256, "out of memory"); return NULL; }
    pthread_mutex_init(&m->lock, NULL);
    m->name = strdup(name);
    m->type = strdup(type);
    m->port = port;
    m->txt = av.strlst_new(txt, count);
    m->poll = av.poll_new();
    if (!m->poll) { snprintf(error, 256, "avahi_threaded_poll_new failed"); attled_mdns_stop(m); return NULL; }
    int err = 0;
    // Not NO_FAIL: a daemon that is not running is told now, not waited for.
    m->client = av.client_new(av.poll_get(m->poll), 0, client_callback, m, &err);
    if (!m->client) {
        snprintf(error, 256, "cannot reach avahi-daemon (%s): is it running? (systemctl start avahi-daemon)", av.strerror_(err));
        attled_mdns_stop(m);
        return NULL;
    }
    if (av.poll_start(m->poll) < 0) { snprintf(error, 256, "avahi_threaded_poll_start failed"); attled_mdns_stop(m); return NULL; }
    return m;
}

int attled_mdns_state(attled_mdns *m) {
    pthread_mutex_lock(&m->lock);
    int s = m->state;
    pthread_mutex_unlock(&m->lock);
    return s;
}

void attled_mdns_name(attled_mdns *m, char *out, int size) {
    pthread_mutex_lock(&m->lock);
    snprintf(out, size, "%s", m->name ? m->name : "");
    pthread_mutex_unlock(&m->lock);
}

void attled_mdns_error(attled_mdns *m, char *out, int size) {
    pthread_mutex_lock(&m->lock);
    snprintf(out, size, "%s", m->error);
    pthread_mutex_unlock(&m->lock);
}

void attled_mdns_stop(attled_mdns *m) {
    if (!m) return;
    if (m->poll) av.poll_stop(m->poll);
    // The thread is stopped: freeing the client withdraws the announcement.
    if (m->client) av.client_free(m->client);
    if (m->poll) av.poll_free(m->poll);
    if (m->txt) av.strlst_free(m->txt);
    free(m->name);
    free(m->type);
    pthread_mutex_destroy(&m->lock);
    free(m);
}
