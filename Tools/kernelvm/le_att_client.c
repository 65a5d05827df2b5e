/*
 * le_att_client: the Linux kernel as an LE central, for the kernel-test guest.
 *
 *   le_att_client [-t SECS] ADDR public|random R,G,B
 *
 * Opens an L2CAP LE socket on the ATT fixed channel (AF_BLUETOOTH,
 * SOCK_SEQPACKET, BTPROTO_L2CAP, l2_cid 4) to ADDR (of the LE address type
 * given: the one `attled serve` advertises with), so that the kernel makes the LE connection
 * itself (its passive scan and LE Create Connection), then speaks ATT over it:
 * Exchange MTU, Find By Type Value for the pycom LED service, Read By Type
 * (0x2803) for its characteristics, a Write Request of R, G and B to the red,
 * green and blue characteristics and a Read Request of each back; then two
 * requests the server must refuse: a 2-octet Write Request to red (Invalid
 * Attribute Value Length; red unchanged) and a Read Request of handle 0x0000
 * (Invalid Handle). One line per
 * step with the PDUs in hex; exit 0 when every value read back is the one
 * written, 1 with a "le_att_client: error: ..." line otherwise, 64 on bad
 * usage. Every socket operation is bounded: connect by poll() within SECS
 * (default 20), each response by SO_RCVTIMEO (5 s), each send by SO_SNDTIMEO.
 *
 * Built static (gcc -static -O2); the few kernel ABI definitions it needs are
 * declared here, so no libbluetooth headers are needed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define AF_BLUETOOTH_ 31
#define BTPROTO_L2CAP_ 0
#define BDADDR_LE_PUBLIC_ 0x01
#define BDADDR_LE_RANDOM_ 0x02
#define L2CAP_CID_ATT_ 0x0004

struct sockaddr_l2_ {
    sa_family_t l2_family;
    uint16_t l2_psm;
    uint8_t l2_bdaddr[6]; /* little endian: the last octet of "C1:.." first */
    uint16_t l2_cid;
    uint8_t l2_bdaddr_type;
};

/* ATT opcodes (Core 5.x, Vol 3, Part F, 3.4.8) */
enum {
    ERROR_RSP = 0x01, MTU_REQ = 0x02, MTU_RSP = 0x03, FIND_TYPE_REQ = 0x06, FIND_TYPE_RSP = 0x07,
    READ_TYPE_REQ = 0x08, READ_TYPE_RSP = 0x09, READ_REQ = 0x0a, READ_RSP = 0x0b,
    WRITE_REQ = 0x12, WRITE_RSP = 0x13, NOTIFY = 0x1b, INDICATE = 0x1d, CONFIRM = 0x1e,
};
#define INVALID_HANDLE 0x01
#define ATTR_NOT_FOUND 0x0a
#define INVALID_LENGTH 0x0d

/* The pycom LED service and its red, green and blue characteristics, as on the
 * wire (128-bit UUIDs, little endian): 36353433-3231-3039-3837-36353433{3231,6261,6262,6263}. */
static const uint8_t SERVICE[16] = {0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38,
                                    0x39, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36};
static const char *CHANNEL[3] = {"red", "green", "blue"};
static const uint8_t CHANNEL_ID[3][2] = {{0x61, 0x62}, {0x62, 0x62}, {0x63, 0x62}};

static int fd = -1;
static double t0;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "le_att_client: error: ");
    vfprintf(stdout, fmt, ap);
    fprintf(stdout, "\n");
    va_end(ap);
    fflush(stdout);
    if (fd >= 0) close(fd);
    exit(1);
}

static void hex(const char *dir, const uint8_t *p, size_t n) {
    printf("  %7.3f %s", now() - t0, dir);
    for (size_t i = 0; i < n; i++) printf(" %02x", p[i]);
    printf("\n");
    fflush(stdout);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static void send_pdu(const uint8_t *p, size_t n) {
    hex(">", p, n);
    ssize_t w = send(fd, p, n, 0);
    if (w != (ssize_t)n) die("send: %s", w < 0 ? strerror(errno) : "short write");
}

/* The response to the request just sent (opcode want, or an Error Response for
 * req): what the server sends meanwhile (notifications, indications) is shown
 * and, for indications, confirmed. Returns the PDU's length. */
static size_t transact(const uint8_t *req, size_t reqlen, uint8_t want, uint8_t *rsp, size_t cap) {
    send_pdu(req, reqlen);
    for (;;) {
        ssize_t n = recv(fd, rsp, cap, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            die("no response to ATT opcode 0x%02x within 5 s", req[0]);
        if (n < 0) die("recv: %s", strerror(errno));
        if (n == 0) die("the link was closed while waiting for the response to 0x%02x", req[0]);
        hex("<", rsp, (size_t)n);
        if (rsp[0] == want) return (size_t)n;
        if (rsp[0] == ERROR_RSP && n >= 5 && rsp[1] == req[0]) return (size_t)n;
        if (rsp[0] == INDICATE) {
            uint8_t c = CONFIRM;
            send_pdu(&c, 1);
            continue;
        }
        if (rsp[0] == NOTIFY) continue;
        die("unexpected ATT PDU 0x%02x while waiting for 0x%02x", rsp[0], want);
    }
}

static int parse_addr(const char *s, uint8_t out[6]) {
    unsigned b[6];
    char tail;
    if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6) return -1;
    for (int i = 0; i < 6; i++) out[5 - i] = (uint8_t)b[i];
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: le_att_client [-t SECS] ADDR public|random R,G,B   (e.g. C1:22:33:44:55:66 random 255,0,0)\n");
    exit(64);
}

int main(int argc, char **argv) {
    double conn_secs = 20;
    int a = 1;
    if (argc > 2 && strcmp(argv[1], "-t") == 0) {
        conn_secs = atof(argv[2]);
        a = 3;
    }
    if (argc - a != 3 || conn_secs <= 0) usage();
    struct sockaddr_l2_ peer;
    memset(&peer, 0, sizeof peer);
    peer.l2_family = AF_BLUETOOTH_;
    peer.l2_cid = L2CAP_CID_ATT_; /* host order is little endian on amd64 and arm64, as the kernel wants */
    if (parse_addr(argv[a], peer.l2_bdaddr) != 0) usage();
    const char *type = argv[a + 1];
    if (strcmp(type, "public") == 0) peer.l2_bdaddr_type = BDADDR_LE_PUBLIC_;
    else if (strcmp(type, "random") == 0) peer.l2_bdaddr_type = BDADDR_LE_RANDOM_;
    else usage();
    unsigned rgb[3];
    char tail;
    if (sscanf(argv[a + 2], "%u,%u,%u%c", &rgb[0], &rgb[1], &rgb[2], &tail) != 3 || rgb[0] > 255 || rgb[1] > 255 ||
        rgb[2] > 255)
        usage();
    t0 = now();

    /* 1. The kernel connects: a non-blocking connect() and poll() until the ATT channel is up. */
    fd = socket(AF_BLUETOOTH_, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, BTPROTO_L2CAP_);
    if (fd < 0) die("socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP): %s", strerror(errno));
    /* Bound to the ATT channel first: that makes it a fixed channel (the kernel's
     * L2CAP_CHAN_FIXED; a SEQPACKET socket is connection-oriented until then, and
     * connect() to a CID alone is EINVAL). BDADDR_ANY: the kernel picks the adapter. */
    struct sockaddr_l2_ local;
    memset(&local, 0, sizeof local);
    local.l2_family = AF_BLUETOOTH_;
    local.l2_cid = L2CAP_CID_ATT_;
    local.l2_bdaddr_type = BDADDR_LE_PUBLIC_;
    if (bind(fd, (struct sockaddr *)&local, sizeof local) != 0) die("bind (any adapter, LE, cid 0x0004): %s", strerror(errno));
    printf("connect: L2CAP LE, cid 0x0004 (ATT), %s (%s), within %.0f s\n", argv[a], type, conn_secs);
    fflush(stdout);
    if (connect(fd, (struct sockaddr *)&peer, sizeof peer) != 0 && errno != EINPROGRESS)
        die("connect %s: %s", argv[a], strerror(errno));
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    int pr = poll(&pfd, 1, (int)(conn_secs * 1000));
    if (pr < 0) die("poll: %s", strerror(errno));
    if (pr == 0) die("the kernel did not connect to %s within %.0f s", argv[a], conn_secs);
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0) die("getsockopt SO_ERROR: %s", strerror(errno));
    if (soerr != 0) die("connect %s: %s", argv[a], strerror(soerr));
    /* Blocking from here on, every recv and send bounded. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    struct timeval tv = {.tv_sec = 5, .tv_usec = 0};
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
        die("setsockopt SO_RCVTIMEO/SO_SNDTIMEO: %s", strerror(errno));
    printf("connected (%.3f s)\n", now() - t0);

    uint8_t req[64], rsp[600];
    size_t n;

    /* 2. Exchange MTU: ours 247; the values written here fit the default 23 anyway. */
    printf("exchange MTU 247\n");
    req[0] = MTU_REQ;
    put16(req + 1, 247);
    n = transact(req, 3, MTU_RSP, rsp, sizeof rsp);
    if (rsp[0] != MTU_RSP || n != 3) die("Exchange MTU: no MTU response");
    printf("  server MTU %u\n", get16(rsp + 1));

    /* 3. The pycom service: Find By Type Value, Primary Service (0x2800) = its UUID. */
    printf("find the pycom LED service (Find By Type Value, 0x2800)\n");
    req[0] = FIND_TYPE_REQ;
    put16(req + 1, 0x0001);
    put16(req + 3, 0xffff);
    put16(req + 5, 0x2800);
    memcpy(req + 7, SERVICE, 16);
    n = transact(req, 23, FIND_TYPE_RSP, rsp, sizeof rsp);
    if (rsp[0] != FIND_TYPE_RSP || n < 5) die("Find By Type Value: the pycom service is not there (error 0x%02x)", rsp[4]);
    uint16_t start = get16(rsp + 1), end = get16(rsp + 3);
    printf("  service 0x%04x-0x%04x\n", start, end);

    /* 4. Its characteristics: Read By Type 0x2803 until Attribute Not Found or the end. */
    printf("discover its characteristics (Read By Type 0x2803)\n");
    uint16_t value_handle[3] = {0, 0, 0};
    uint16_t from = start;
    while (from <= end && from != 0) {
        req[0] = READ_TYPE_REQ;
        put16(req + 1, from);
        put16(req + 3, end);
        put16(req + 5, 0x2803);
        n = transact(req, 7, READ_TYPE_RSP, rsp, sizeof rsp);
        if (rsp[0] == ERROR_RSP) {
            if (rsp[4] == ATTR_NOT_FOUND) break;
            die("Read By Type: error 0x%02x at 0x%04x", rsp[4], get16(rsp + 2));
        }
        size_t len = rsp[1];
        if (len < 7 || n < 2 + len) die("Read By Type: bad response length %zu", len);
        uint16_t last = from;
        for (size_t off = 2; off + len <= n; off += len) {
            const uint8_t *e = rsp + off;
            last = get16(e);
            uint16_t vh = get16(e + 3);
            printf("  0x%04x props 0x%02x value 0x%04x%s\n", last, e[2], vh, len == 21 ? "" : " (16-bit UUID)");
            for (int c = 0; c < 3 && len == 21; c++)
                if (e[5] == CHANNEL_ID[c][0] && e[6] == CHANNEL_ID[c][1] && memcmp(e + 7, SERVICE + 2, 14) == 0)
                    value_handle[c] = vh;
        }
        if (last < from || last == 0xffff) break;
        from = (uint16_t)(last + 1);
    }
    for (int c = 0; c < 3; c++) {
        if (value_handle[c] == 0) die("no %s characteristic in the pycom service", CHANNEL[c]);
        printf("  %s = 0x%04x\n", CHANNEL[c], value_handle[c]);
    }

    /* 5. Write Request per channel, then a Read Request of each back. */
    for (int c = 0; c < 3; c++) {
        printf("write %s = %u (Write Request)\n", CHANNEL[c], rgb[c]);
        req[0] = WRITE_REQ;
        put16(req + 1, value_handle[c]);
        req[3] = (uint8_t)rgb[c];
        n = transact(req, 4, WRITE_RSP, rsp, sizeof rsp);
        if (rsp[0] != WRITE_RSP) die("Write Request 0x%04x: error 0x%02x", value_handle[c], rsp[4]);
    }
    for (int c = 0; c < 3; c++) {
        printf("read %s back (Read Request)\n", CHANNEL[c]);
        req[0] = READ_REQ;
        put16(req + 1, value_handle[c]);
        n = transact(req, 3, READ_RSP, rsp, sizeof rsp);
        if (rsp[0] != READ_RSP) die("Read Request 0x%04x: error 0x%02x", value_handle[c], rsp[4]);
        if (n != 2) die("%s read back %zu octets, expected 1", CHANNEL[c], n - 1);
        if (rsp[1] != rgb[c]) die("%s read back %u, wrote %u", CHANNEL[c], rsp[1], rgb[c]);
        printf("  %s = %u\n", CHANNEL[c], rsp[1]);
    }
    /* 6. What the server must refuse: a value longer than the board takes, and handle 0. */
    printf("write 2 octets to red (Write Request): Invalid Attribute Value Length expected\n");
    req[0] = WRITE_REQ;
    put16(req + 1, value_handle[0]);
    req[3] = 0x00;
    req[4] = 0x00;
    n = transact(req, 5, WRITE_RSP, rsp, sizeof rsp);
    if (rsp[0] != ERROR_RSP || rsp[4] != INVALID_LENGTH || get16(rsp + 2) != value_handle[0])
        die("a 2-octet write to red got %s, expected Error Response 0x0d at 0x%04x", rsp[0] == WRITE_RSP ? "a Write Response" : "another error", value_handle[0]);
    req[0] = READ_REQ;
    put16(req + 1, value_handle[0]);
    n = transact(req, 3, READ_RSP, rsp, sizeof rsp);
    if (rsp[0] != READ_RSP || n != 2 || rsp[1] != rgb[0]) die("red changed after the refused write");
    printf("  refused; red still %u\n", rsp[1]);
    printf("read handle 0x0000 (Read Request): Invalid Handle expected\n");
    req[0] = READ_REQ;
    put16(req + 1, 0x0000);
    n = transact(req, 3, READ_RSP, rsp, sizeof rsp);
    if (rsp[0] != ERROR_RSP || rsp[4] != INVALID_HANDLE) die("a read of handle 0x0000 was not refused with Invalid Handle");
    printf("  refused\n");
    printf("ok: %u,%u,%u written and read back (%.3f s)\n", rgb[0], rgb[1], rgb[2], now() - t0);
    close(fd);
    return 0;
}
