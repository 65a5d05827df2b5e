/*
 * vhci_bridge: runs in the kernel-test guest. It creates a virtual HCI
 * controller with the kernel's hci_vhci driver (/dev/vhci) and copies HCI
 * packets between it and a virtio-serial port whose host end is a Bumble
 * virtual controller speaking H4.
 *
 *   vhci_bridge [-v] [-d MS] [-u] PORT   PORT: /dev/vportNpM, or a port name
 *                                   given with -device virtserialport,name=NAME
 *
 * -u: for a kernel without hci_vhci (Debian's arm64 kernel has
 * CONFIG_BT_HCIVHCI unset), the controller is a UART one instead: the slave
 * of a pseudo-terminal gets the HCI line discipline (N_HCI) with the H4
 * protocol (hci_uart, HCIUARTSETPROTO, as btattach does for a serial port),
 * and the pty's master side is copied to and from the port. The kernel sees
 * an H4 byte stream on both ends, so no framing is needed towards it; the
 * framing below still finds the events to delay.
 *
 * -d MS delays the controller's answers to commands (Command Complete and
 * Command Status events) by MS milliseconds: a slow controller, so that the
 * kernel's own setup and power-up sequences take long enough for a test to
 * meet them in progress. Other packets (advertising reports, ACL) are not
 * delayed. SIGUSR1 turns the delay on (MS, or 50 ms), SIGUSR2 turns it off.
 *
 * /dev/vhci carries one whole packet per read() and needs one whole packet
 * per write(), each starting with its H4 packet type byte. The port is a
 * byte stream, so bytes from it are framed here by packet type (command
 * header 3 bytes, ACL 4, SCO 3, event 2, ISO 4) before each write().
 * Writing "ff 00" to /dev/vhci creates a primary controller; the driver
 * answers with a vendor packet "ff 00 idx_lo idx_hi", which is consumed
 * here and never forwarded.
 *
 * Built static (gcc -static -O2) so it runs in a busybox initramfs.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* The HCI line discipline's ioctls (the kernel's drivers/bluetooth/hci_uart.h). */
#ifndef N_HCI
#define N_HCI 15
#endif
#define HCIUARTSETPROTO _IOW('U', 200, int)
#define HCIUARTGETDEVICE _IOR('U', 202, int)
#define HCI_UART_H4 0

enum { H4_CMD = 0x01, H4_ACL = 0x02, H4_SCO = 0x03, H4_EVT = 0x04, H4_ISO = 0x05, H4_VENDOR = 0xff };

static int verbose;
static int uart;                         /* -u: hci_uart on a pty instead of /dev/vhci */
static int slow_ms = 50;                 /* the delay SIGUSR1 turns on */
static volatile sig_atomic_t delay_ms;   /* the delay in force */

static void on_signal(int sig) { delay_ms = sig == SIGUSR1 ? slow_ms : 0; }

static void logmsg(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("vhci_bridge: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void dump(const char *dir, const uint8_t *p, size_t n) {
    if (!verbose) return;
    fprintf(stderr, "vhci_bridge: %s", dir);
    for (size_t i = 0; i < n && i < 48; i++) fprintf(stderr, " %02x", p[i]);
    fprintf(stderr, n > 48 ? " ...\n" : "\n");
}

/* Resolves a virtio-serial port name (from /sys/class/virtio-ports/X/name) to /dev/X. */
static int resolve_port(const char *arg, char *out, size_t outlen) {
    if (arg[0] == '/') { snprintf(out, outlen, "%s", arg); return 0; }
    DIR *d = opendir("/sys/class/virtio-ports");
    if (!d) return -1;
    struct dirent *e;
    int found = -1;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[512], name[256] = {0};
        snprintf(path, sizeof path, "/sys/class/virtio-ports/%s/name", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(name, sizeof name, f)) name[strcspn(name, "\n")] = 0;
        fclose(f);
        if (strcmp(name, arg) == 0) {
            snprintf(out, outlen, "/dev/%s", e->d_name);
            found = 0;
            break;
        }
    }
    closedir(d);
    return found;
}

static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) { struct pollfd q = { fd, POLLOUT, 0 }; poll(&q, 1, 100); continue; }
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Length of the whole H4 packet at p (n bytes available): >0 when known,
 * 0 when more bytes are needed, -1 for an unknown packet type. */
static long h4_length(const uint8_t *p, size_t n) {
    if (n < 1) return 0;
    switch (p[0]) {
    case H4_CMD: return n < 4 ? 0 : 4 + (long)p[3];
    case H4_ACL: return n < 5 ? 0 : 5 + (long)(p[3] | (p[4] << 8));
    case H4_SCO: return n < 4 ? 0 : 4 + (long)p[3];
    case H4_EVT: return n < 3 ? 0 : 3 + (long)p[2];
    case H4_ISO: return n < 5 ? 0 : 5 + (long)((p[3] | (p[4] << 8)) & 0x3fff);
    default: return -1;
    }
}

int main(int argc, char **argv) {
    int argi = 1;
    for (; argi < argc && argv[argi][0] == '-'; argi++) {
        if (strcmp(argv[argi], "-v") == 0) verbose = 1;
        else if (strcmp(argv[argi], "-d") == 0 && argi + 1 < argc) { slow_ms = atoi(argv[++argi]); delay_ms = slow_ms; }
        else if (strcmp(argv[argi], "-u") == 0) uart = 1;
        else break;
    }
    if (argi >= argc) { fprintf(stderr, "usage: vhci_bridge [-v] [-d MS] [-u] /dev/vportNpM|PORTNAME\n"); return 64; }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);

    char port[512];
    /* The port appears with the virtio_console module: wait for it briefly. */
    int tries = 0;
    while (resolve_port(argv[argi], port, sizeof port) != 0 || access(port, F_OK) != 0) {
        if (++tries > 100) { logmsg("no virtio-serial port %s", argv[argi]); return 69; }
        usleep(50 * 1000);
    }
    int pfd = open(port, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (pfd < 0) { logmsg("open %s: %s", port, strerror(errno)); return 69; }
    int vfd;
    const char *dev = "/dev/vhci";
    if (uart) {
        /* The pty's master is vfd; its slave (kept open: closing it ends the
         * line discipline and the controller) carries N_HCI + H4. */
        vfd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (vfd < 0 || grantpt(vfd) != 0 || unlockpt(vfd) != 0) { logmsg("pty: %s", strerror(errno)); return 69; }
        dev = ptsname(vfd);
        int tfd = dev ? open(dev, O_RDWR | O_NOCTTY | O_CLOEXEC) : -1;
        if (tfd < 0) { logmsg("open pty slave: %s", strerror(errno)); return 69; }
        struct termios tio;
        if (tcgetattr(tfd, &tio) == 0) { cfmakeraw(&tio); tcsetattr(tfd, TCSANOW, &tio); }
        int ldisc = N_HCI, index = -1;
        if (ioctl(tfd, TIOCSETD, &ldisc) != 0) { logmsg("TIOCSETD N_HCI: %s (is hci_uart loaded?)", strerror(errno)); return 69; }
        if (ioctl(tfd, HCIUARTSETPROTO, HCI_UART_H4) != 0) { logmsg("HCIUARTSETPROTO H4: %s", strerror(errno)); return 69; }
        index = ioctl(tfd, HCIUARTGETDEVICE, 0);
        if (index >= 0) logmsg("controller created: hci%d (hci_uart H4 on %s)", index, dev);
        else logmsg("hci_uart H4 on %s (HCIUARTGETDEVICE: %s)", dev, strerror(errno));
    } else {
        vfd = open("/dev/vhci", O_RDWR | O_CLOEXEC);
        if (vfd < 0) { logmsg("open /dev/vhci: %s (is hci_vhci loaded?)", strerror(errno)); return 69; }
        /* Create a primary controller now (without this, the driver creates one after 1 s). */
        const uint8_t create[2] = { H4_VENDOR, 0x00 };
        if (write(vfd, create, sizeof create) != (ssize_t)sizeof create) {
            logmsg("create controller: %s", strerror(errno));
            return 69;
        }
    }
    logmsg("%s <-> %s", port, dev);

    static uint8_t vbuf[70000];       /* one packet from /dev/vhci */
    static uint8_t sbuf[2 * 70000];   /* byte stream from the port */
    size_t have = 0;
    int port_eof_logged = 0;

    for (;;) {
        struct pollfd fds[2] = { { vfd, POLLIN, 0 }, { pfd, POLLIN, 0 } };
        int r = poll(fds, 2, -1);
        if (r < 0) {
            if (errno == EINTR) continue;
            logmsg("poll: %s", strerror(errno));
            return 74;
        }
        if (fds[0].revents & POLLIN) {
            ssize_t n = read(vfd, vbuf, sizeof vbuf);
            if (n < 0 && errno != EINTR && errno != EAGAIN) { logmsg("read %s: %s", dev, strerror(errno)); return 74; }
            if (n > 0) {
                if (vbuf[0] == H4_VENDOR && !uart) {
                    if (n >= 4) logmsg("controller created: hci%u", (unsigned)(vbuf[2] | (vbuf[3] << 8)));
                } else {
                    dump("host>", vbuf, (size_t)n);
                    if (write_all(pfd, vbuf, (size_t)n) != 0) logmsg("write %s: %s", port, strerror(errno));
                }
            }
        } else if (fds[0].revents & (POLLERR | POLLHUP)) {
            logmsg("%s closed", dev);
            return 74;
        }
        if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(pfd, sbuf + have, sizeof sbuf - have);
            if (n < 0) {
                if (errno == EINTR || errno == EAGAIN) continue;
                logmsg("read %s: %s", port, strerror(errno));
                return 74;
            }
            if (n == 0) {
                /* The host end is not connected (yet, or any more): wait for it. */
                if (!port_eof_logged) { logmsg("%s: host end not connected; waiting", port); port_eof_logged = 1; }
                usleep(100 * 1000);
                continue;
            }
            port_eof_logged = 0;
            have += (size_t)n;
            size_t off = 0;
            for (;;) {
                long len = h4_length(sbuf + off, have - off);
                if (len < 0) {
                    logmsg("dropping byte 0x%02x: not an H4 packet type", sbuf[off]);
                    off++;
                    continue;
                }
                if (len == 0 || (size_t)len > have - off) break;
                dump("ctrl>", sbuf + off, (size_t)len);
                if (delay_ms > 0 && sbuf[off] == H4_EVT && (sbuf[off + 1] == 0x0e || sbuf[off + 1] == 0x0f))
                    usleep((useconds_t)delay_ms * 1000);
                /* One whole packet per write(), as /dev/vhci requires (the pty takes any split). */
                ssize_t w;
                if (uart) w = write_all(vfd, sbuf + off, (size_t)len) == 0 ? len : -1;
                else do { w = write(vfd, sbuf + off, (size_t)len); } while (w < 0 && errno == EINTR);
                if (w != len) logmsg("write %s (%ld bytes): %s", dev, len, w < 0 ? strerror(errno) : "short write");
                off += (size_t)len;
            }
            memmove(sbuf, sbuf + off, have - off);
            have -= off;
        }
    }
}
