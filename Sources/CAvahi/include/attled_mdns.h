// mDNS service announcement through the local avahi-daemon (Debian's
// libavahi-client3, opened with dlopen only when a proxy announces itself,
// so nothing else maps it).
//
// avahi-client runs its own thread (avahi_threaded_poll): it registers the
// service, answers a name collision by taking avahi's alternative name, and
// registers again after the daemon restarts. The caller only starts, reads
// the state, and stops.
#ifndef ATTLED_MDNS_H
#define ATTLED_MDNS_H

#include <stdint.h>

typedef struct attled_mdns attled_mdns;

/// Where an announcement stands.
enum attled_mdns_state {
    ATTLED_MDNS_STARTING = 0,    // registering with the daemon
    ATTLED_MDNS_ESTABLISHED = 1, // announced under attled_mdns_name()
    ATTLED_MDNS_FAILED = 2,      // attled_mdns_error() says why
};

/// Announces `name` as `type` (e.g. "_esphomelib._tcp") on `port` with the
/// TXT records `txt[0..count)` ("key=value"). NULL when libavahi-client
/// cannot be loaded or the daemon is not reachable: `error` (at least 256
/// bytes) says why.
attled_mdns *attled_mdns_publish(const char *name, const char *type, uint16_t port,
                                 const char **txt, int count, char *error);

/// The state, the name announced (after a collision, avahi's alternative),
/// and the last failure (empty when none). Thread-safe.
int attled_mdns_state(attled_mdns *m);
void attled_mdns_name(attled_mdns *m, char *out, int size);
void attled_mdns_error(attled_mdns *m, char *out, int size);

/// Withdraws the announcement and frees everything.
void attled_mdns_stop(attled_mdns *m);

#endif
