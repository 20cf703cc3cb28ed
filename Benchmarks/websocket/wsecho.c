/*
 * The WebSocket echo backend and load client of Benchmarks/websocket_echo.py, in C so that neither
 * end is what the benchmark measures (a Python client tops out well below a proxy on one core).
 *
 *   wsecho server PORT
 *       Answers every upgrade (RFC 6455 §4.2.2: Sec-WebSocket-Accept from the key), then echoes
 *       each message unmasked with its opcode (§5.2), a ping with a pong, a close with a close.
 *   wsecho client PORT PATH TUNNELS SIZE WARMUP SECONDS
 *       Opens TUNNELS WebSockets to 127.0.0.1:PORT/PATH; each sends one SIZE-byte binary message
 *       and waits for its echo before sending the next. After WARMUP seconds it counts the echoes
 *       for SECONDS and prints "messages seconds" on stdout. The first echo on each tunnel is
 *       checked byte for byte; any wrong answer exits 1.
 *
 * One thread, epoll, non-blocking sockets. Build: cc -O2 -o wsecho wsecho.c -lcrypto
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void fail(const char *what) {
    fprintf(stderr, "wsecho: %s\n", what);
    exit(1);
}

static double now(void) {
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) != 0) die("clock_gettime");
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* A byte buffer that grows as needed; bytes are taken from the front. */
typedef struct {
    unsigned char *p;
    size_t len, cap;
} buf_t;

static void buf_reserve(buf_t *b, size_t n) {
    if (b->cap - b->len >= n) return;
    size_t c = b->cap ? b->cap : 65536;
    while (c - b->len < n) c *= 2;
    b->p = realloc(b->p, c);
    if (!b->p) die("realloc");
    b->cap = c;
}

static void buf_drop(buf_t *b, size_t n) {
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

static void nonblocking_nodelay(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("setsockopt");
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) die("fcntl");
}

/* A frame header (RFC 6455 §5.2) for a payload of `len` bytes; returns its length. */
static size_t frame_header(unsigned char *h, unsigned char b0, uint64_t len, int masked) {
    size_t n;
    h[0] = b0;
    if (len < 126) {
        h[1] = (unsigned char)len;
        n = 2;
    } else if (len < 65536) {
        h[1] = 126;
        h[2] = (unsigned char)(len >> 8);
        h[3] = (unsigned char)len;
        n = 4;
    } else {
        h[1] = 127;
        for (int i = 0; i < 8; i++) h[2 + i] = (unsigned char)(len >> (56 - 8 * i));
        n = 10;
    }
    if (masked) h[1] |= 0x80;
    return n;
}

/* Parses a frame header at p (avail bytes); 0 while incomplete, else the header's length. */
static size_t parse_header(const unsigned char *p, size_t avail, unsigned char *b0, uint64_t *len,
                           const unsigned char **mask) {
    if (avail < 2) return 0;
    size_t n = 2;
    uint64_t l = p[1] & 0x7F;
    if (l == 126) {
        if (avail < 4) return 0;
        l = ((uint64_t)p[2] << 8) | p[3];
        n = 4;
    } else if (l == 127) {
        if (avail < 10) return 0;
        l = 0;
        for (int i = 0; i < 8; i++) l = (l << 8) | p[2 + i];
        n = 10;
    }
    *mask = NULL;
    if (p[1] & 0x80) {
        if (avail < n + 4) return 0;
        *mask = p + n;
        n += 4;
    }
    *b0 = p[0];
    *len = l;
    return n;
}

/* ------------------------------------------------------------------ the echo backend */

typedef struct {
    int fd;
    int upgraded;
    buf_t in, out;
} conn_t;

static void watch(int ep, int op, conn_t *c, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(ep, op, c->fd, &ev) != 0) die("epoll_ctl");
}

static void drop(int ep, conn_t *c) {
    if (epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL) != 0) die("epoll_ctl del");
    close(c->fd);
    free(c->in.p);
    free(c->out.p);
    free(c);
}

/* Writes what `out` holds; -1 when the peer is gone. */
static int flush_out(conn_t *c) {
    while (c->out.len) {
        ssize_t n = send(c->fd, c->out.p, c->out.len, MSG_NOSIGNAL);
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        buf_drop(&c->out, (size_t)n);
    }
    return 0;
}

/* Queues `n` bytes to write. */
static void queue(conn_t *c, const void *p, size_t n) {
    buf_reserve(&c->out, n);
    memcpy(c->out.p + c->out.len, p, n);
    c->out.len += n;
}

/* The 101 for a complete upgrade request in `in` (1); 0 while it is incomplete; -1 when it is not
   one: a request without Sec-WebSocket-Key (a gateway's health probe) gets 200 and a close. */
static int handshake(conn_t *c) {
    unsigned char *end = memmem(c->in.p, c->in.len, "\r\n\r\n", 4);
    if (!end) return c->in.len > 65536 ? -1 : 0;
    size_t head = (size_t)(end - c->in.p) + 4;
    char *text = strndup((char *)c->in.p, head);
    if (!text) die("strndup");
    char *key = strcasestr(text, "\r\nSec-WebSocket-Key:");
    if (!key) {
        free(text);
        static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n";
        queue(c, ok, sizeof ok - 1);
        (void)flush_out(c);
        return -1;
    }
    key += 20;
    while (*key == ' ' || *key == '\t') key++;
    size_t klen = strcspn(key, " \t\r");
    char joined[256];
    if (klen > 100) {
        free(text);
        return -1;
    }
    int jlen = snprintf(joined, sizeof joined, "%.*s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", (int)klen, key);
    free(text);
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1((unsigned char *)joined, (size_t)jlen, digest);
    unsigned char accept[64];
    EVP_EncodeBlock(accept, digest, SHA_DIGEST_LENGTH);
    char reply[256];
    int rlen = snprintf(reply, sizeof reply,
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
    queue(c, reply, (size_t)rlen);
    buf_drop(&c->in, head);
    c->upgraded = 1;
    return 1;
}

/* Echoes every whole frame in `in`; -1 once the connection should close. */
static int echo_frames(conn_t *c) {
    size_t at = 0;
    int closing = 0;
    while (!closing) {
        unsigned char b0;
        uint64_t len;
        const unsigned char *mask;
        size_t h = parse_header(c->in.p + at, c->in.len - at, &b0, &len, &mask);
        if (!h || c->in.len - at - h < len) break;
        unsigned char *payload = c->in.p + at + h;
        if (mask)
            for (uint64_t i = 0; i < len; i++) payload[i] ^= mask[i & 3];
        unsigned char op = b0 & 0x0F;
        if (op == 0x9) b0 = (unsigned char)((b0 & 0xF0) | 0xA); /* a ping's pong (§5.5.3) */
        if (op == 0x8) closing = 1;                             /* a close is answered, then closed (§5.5.1) */
        if (op != 0xA) {
            unsigned char hdr[10];
            size_t hl = frame_header(hdr, b0, len, 0);
            queue(c, hdr, hl);
            queue(c, payload, len);
        }
        at += h + len;
    }
    buf_drop(&c->in, at);
    return closing ? -1 : 0;
}

static int serve(int port) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0) die("socket");
    int one = 1;
    if (setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) die("setsockopt");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0) die("bind");
    if (listen(l, 4096) != 0) die("listen");
    int lflags = fcntl(l, F_GETFL);
    if (lflags < 0 || fcntl(l, F_SETFL, lflags | O_NONBLOCK) != 0) die("fcntl");
    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, l, &lev) != 0) die("epoll_ctl");
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept(l, NULL, NULL)) >= 0) {
                    nonblocking_nodelay(fd);
                    conn_t *nc = calloc(1, sizeof *nc);
                    if (!nc) die("calloc");
                    nc->fd = fd;
                    watch(ep, EPOLL_CTL_ADD, nc, EPOLLIN);
                }
                if (errno != EAGAIN && errno != EWOULDBLOCK) die("accept");
                continue;
            }
            int gone = 0;
            if (evs[i].events & EPOLLIN) {
                for (;;) {
                    buf_reserve(&c->in, 65536);
                    ssize_t r = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, 0);
                    if (r > 0) {
                        c->in.len += (size_t)r;
                        continue;
                    }
                    if (r == 0 || errno != EAGAIN) gone = 1;
                    break;
                }
                if (!c->upgraded && handshake(c) < 0) gone = 1;
                if (c->upgraded && echo_frames(c) < 0) {
                    (void)flush_out(c); /* the close frame's answer, as far as it goes; then the close */
                    gone = 1;
                }
            }
            if (!gone && flush_out(c) < 0) gone = 1;
            if (gone) {
                drop(ep, c);
                continue;
            }
            /* Reading waits while the echo is not written: the client's pace, not memory, bounds it. */
            watch(ep, EPOLL_CTL_MOD, c, c->out.len ? EPOLLOUT : EPOLLIN);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ the load client */

typedef struct {
    int fd;
    size_t sent;          /* bytes of the message frame written */
    unsigned char hdr[14]; /* the echo's header as it arrives */
    size_t hlen;
    uint64_t left;        /* payload bytes of the echo still to read */
    uint64_t got;         /* payload bytes of the echo read */
    int checked;          /* the first echo was compared byte for byte */
    unsigned char *copy;  /* the first echo, for that comparison */
} tunnel_t;

static int dial(int port, const char *path) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("connect");
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                     "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", path, port);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) die("send");
    char head[4096];
    size_t got = 0;
    while (!memmem(head, got, "\r\n\r\n", 4)) {
        if (got == sizeof head) fail("the upgrade's answer head is too long");
        /* One byte at a time: nothing past the head may be taken from the socket here. */
        ssize_t r = recv(fd, head + got, 1, 0);
        if (r <= 0) fail("the connection closed before the upgrade's answer");
        got += (size_t)r;
    }
    if (got < 12 || memcmp(head, "HTTP/1.1 101", 12) != 0) {
        fprintf(stderr, "wsecho: the upgrade was answered %.*s\n", (int)(strchr(head, '\r') - head), head);
        exit(1);
    }
    nonblocking_nodelay(fd);
    return fd;
}

static int load(int port, const char *path, int tunnels, size_t size, double warmup, double seconds) {
    /* RFC 6455 §5.3 wants a fresh mask per frame; a proxy never reads it, and the backend unmasks
       whatever it is, so one masked frame is built once and sent again and again. */
    unsigned char mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    unsigned char *payload = malloc(size);
    unsigned char *frame = malloc(size + 14);
    if (!payload || !frame) die("malloc");
    for (size_t i = 0; i < size; i++) payload[i] = (unsigned char)(i * 31 + 7);
    size_t hl = frame_header(frame, 0x82, size, 1);
    memcpy(frame + hl, mask, 4);
    hl += 4;
    for (size_t i = 0; i < size; i++) frame[hl + i] = payload[i] ^ mask[i & 3];
    size_t flen = hl + size;

    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    tunnel_t *ts = calloc((size_t)tunnels, sizeof *ts);
    if (!ts) die("calloc");
    for (int i = 0; i < tunnels; i++) {
        ts[i].fd = dial(port, path);
        ts[i].copy = malloc(size);
        if (!ts[i].copy) die("malloc");
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = &ts[i]};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, ts[i].fd, &ev) != 0) die("epoll_ctl");
    }
    unsigned char *scratch = malloc(1 << 18);
    if (!scratch) die("malloc");
    double start = now(), counting = start + warmup, end = counting + seconds;
    long messages = 0;
    struct epoll_event evs[256];
    for (;;) {
        double t = now();
        if (t >= end) break;
        int n = epoll_wait(ep, evs, 256, 100);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            tunnel_t *c = evs[i].data.ptr;
            int progress = 1;
            while (progress) {
                progress = 0;
                /* The message out, whole, before its echo is awaited. */
                if (c->sent < flen) {
                    ssize_t w = send(c->fd, frame + c->sent, flen - c->sent, MSG_NOSIGNAL);
                    if (w < 0 && errno != EAGAIN) die("send");
                    if (w > 0) {
                        c->sent += (size_t)w;
                        progress = 1;
                    }
                    if (c->sent < flen) break;
                }
                ssize_t r = recv(c->fd, scratch, 1 << 18, 0);
                if (r == 0) fail("a tunnel closed");
                if (r < 0) {
                    if (errno != EAGAIN) die("recv");
                    break;
                }
                progress = 1;
                size_t at = 0;
                while (at < (size_t)r) {
                    if (c->left == 0 && c->got == 0) {
                        /* The echo's header, gathered across reads. */
                        while (at < (size_t)r && c->hlen < sizeof c->hdr) {
                            c->hdr[c->hlen++] = scratch[at++];
                            unsigned char b0;
                            uint64_t len;
                            const unsigned char *m;
                            if (parse_header(c->hdr, c->hlen, &b0, &len, &m)) {
                                if (b0 != 0x82 || m || len != size) fail("the echo is not the message's frame");
                                c->left = len;
                                c->hlen = 0;
                                break;
                            }
                        }
                        if (c->left == 0) continue;
                    }
                    size_t take = (size_t)r - at < c->left ? (size_t)r - at : (size_t)c->left;
                    if (!c->checked) memcpy(c->copy + c->got, scratch + at, take);
                    at += take;
                    c->left -= take;
                    c->got += take;
                    if (c->left == 0) {
                        if (at != (size_t)r) fail("bytes came before the next message was sent");
                        if (!c->checked) {
                            if (memcmp(c->copy, payload, size) != 0) fail("an echo differs from its message");
                            c->checked = 1;
                        }
                        c->got = 0;
                        c->sent = 0;
                        if (now() >= counting) messages++;
                    }
                }
            }
        }
    }
    double measured = now() - counting;
    printf("%ld %.3f\n", messages, measured);
    for (int i = 0; i < tunnels; i++) close(ts[i].fd);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "server") == 0) return serve(atoi(argv[2]));
    if (argc == 8 && strcmp(argv[1], "client") == 0)
        return load(atoi(argv[2]), argv[3], atoi(argv[4]), (size_t)atol(argv[5]), atof(argv[6]), atof(argv[7]));
    fprintf(stderr, "usage: wsecho server PORT | wsecho client PORT PATH TUNNELS SIZE WARMUP SECONDS\n");
    return 2;
}
