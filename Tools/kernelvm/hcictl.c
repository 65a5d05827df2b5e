/*
 * hcictl: a tiny adapter tool for the kernel-test guest (no BlueZ there).
 *
 *   hcictl state hciN              prints "hciN UP|DOWN flags=0x.. bdaddr=.."; exit 0 up, 1 down, 2 missing
 *   hcictl up hciN | down hciN     HCIDEVUP / HCIDEVDOWN (already up/down is success)
 *   hcictl wait hciN present|up|down SECONDS
 *                                  polls every 20 ms; exit 0 when reached, 1 on timeout
 *   hcictl asuser UID CMD [ARG...] drops root (groups, gid, uid = UID) and execs CMD
 *
 * The flags come from HCIGETDEVINFO, as hciconfig reads them. The kernel
 * reports a device it powered only for its own setup (HCI_AUTO_OFF) as down.
 * Built static (gcc -static -O2); the kernel ABI is declared here, so no
 * libbluetooth headers are needed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define AF_BLUETOOTH_ 31
#define BTPROTO_HCI_ 1
#define HCIDEVUP_ _IOW('H', 201, int)
#define HCIDEVDOWN_ _IOW('H', 202, int)
#define HCIGETDEVINFO_ _IOR('H', 211, int)
#define HCI_UP_BIT 0
#define HCI_INIT_BIT 1
#define HCI_RUNNING_BIT 2

struct hci_dev_stats_ {
    uint32_t err_rx, err_tx, cmd_tx, evt_rx, acl_tx, acl_rx, sco_tx, sco_rx, byte_rx, byte_tx;
};
struct hci_dev_info_ {
    uint16_t dev_id;
    char name[8];
    uint8_t bdaddr[6];
    uint32_t flags;
    uint8_t type;
    uint8_t features[8];
    uint32_t pkt_type, link_policy, link_mode;
    uint16_t acl_mtu, acl_pkts, sco_mtu, sco_pkts;
    struct hci_dev_stats_ stat;
};

static int parse_dev(const char *s) {
    if (strncmp(s, "hci", 3) == 0) s += 3;
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < 0 || v > 0xffff) { fprintf(stderr, "hcictl: bad adapter '%s'\n", s); exit(64); }
    return (int)v;
}

static int ctl_socket(void) {
    int fd = socket(AF_BLUETOOTH_, SOCK_RAW | SOCK_CLOEXEC, BTPROTO_HCI_);
    if (fd < 0) { fprintf(stderr, "hcictl: socket(AF_BLUETOOTH): %s\n", strerror(errno)); exit(69); }
    return fd;
}

/* 1 up, 0 down, -1 missing */
static int get_state(int fd, int dev, struct hci_dev_info_ *di) {
    memset(di, 0, sizeof *di);
    di->dev_id = (uint16_t)dev;
    if (ioctl(fd, HCIGETDEVINFO_, di) != 0) return -1;
    return (di->flags & (1u << HCI_UP_BIT)) ? 1 : 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "asuser") == 0 && argc >= 4) {
        uid_t uid = (uid_t)atoi(argv[2]);
        if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) {
            fprintf(stderr, "hcictl: cannot drop to uid %u: %s\n", uid, strerror(errno));
            return 71;
        }
        execv(argv[3], argv + 3);
        fprintf(stderr, "hcictl: exec %s: %s\n", argv[3], strerror(errno));
        return 127;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: hcictl state|up|down hciN | wait hciN present|up|down SECONDS | asuser UID CMD...\n");
        return 64;
    }
    int dev = parse_dev(argv[2]);
    int fd = ctl_socket();
    struct hci_dev_info_ di;
    if (strcmp(argv[1], "state") == 0) {
        int s = get_state(fd, dev, &di);
        if (s < 0) { printf("hci%d MISSING (%s)\n", dev, strerror(errno)); return 2; }
        printf("hci%d %s%s%s flags=0x%x bdaddr=%02X:%02X:%02X:%02X:%02X:%02X\n", dev, s ? "UP" : "DOWN",
               (di.flags & (1u << HCI_INIT_BIT)) ? " INIT" : "", (di.flags & (1u << HCI_RUNNING_BIT)) ? " RUNNING" : "",
               di.flags, di.bdaddr[5], di.bdaddr[4], di.bdaddr[3], di.bdaddr[2], di.bdaddr[1], di.bdaddr[0]);
        return s ? 0 : 1;
    }
    if (strcmp(argv[1], "up") == 0 || strcmp(argv[1], "down") == 0) {
        int up = argv[1][0] == 'u';
        if (ioctl(fd, up ? HCIDEVUP_ : HCIDEVDOWN_, dev) != 0 && !(up && errno == EALREADY)) {
            fprintf(stderr, "hcictl: %s hci%d: %s\n", argv[1], dev, strerror(errno));
            return 1;
        }
        return 0;
    }
    if (strcmp(argv[1], "wait") == 0 && argc >= 5) {
        const char *what = argv[3];
        double deadline = now() + atof(argv[4]);
        for (;;) {
            int s = get_state(fd, dev, &di);
            if ((strcmp(what, "present") == 0 && s >= 0) || (strcmp(what, "up") == 0 && s == 1) ||
                (strcmp(what, "down") == 0 && s == 0))
                return 0;
            if (now() >= deadline) {
                fprintf(stderr, "hcictl: hci%d not %s after %s s (state %s)\n", dev, what, argv[4],
                        s < 0 ? "missing" : s ? "up" : "down");
                return 1;
            }
            usleep(20 * 1000);
        }
    }
    fprintf(stderr, "hcictl: unknown command %s\n", argv[1]);
    return 64;
}
