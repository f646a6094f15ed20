/* RoCEv2 framing for the native host path (rocev2.h says what; hostagent/collectives/rocev2.py
 * is the reference). */
#define _GNU_SOURCE
#include "rocev2.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#define MAX_DATAGRAM 2048               /* transport.py's: a datagram is read this far */
#define SOCKET_BUFFER_BYTES (4 << 20)   /* transport.py's SOCKET_BUFFER_BYTES */
#define RATE_MESSAGE_BYTES 16           /* ratecontrol.py: "HARC", flow u32, bits/s f64, big-endian */
#define MAX_RATE_MESSAGES 256           /* read per poll at most */

static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;   /* the lists of ports and rate listeners */

uint32_t rv_qp(uint32_t group, uint32_t rank)
{
    return (group << RV_RANK_BITS | rank) & 0xFFFFFF;
}

void rv_bth(uint8_t bth[RV_BTH_BYTES], uint32_t qp)
{
    memset(bth, 0, RV_BTH_BYTES);       /* flags 0, reserved 0, PSN word 0 */
    bth[0] = RV_OPCODE_SEND_ONLY;
    bth[2] = bth[3] = 0xFF;             /* P_Key */
    bth[5] = (uint8_t)(qp >> 16);
    bth[6] = (uint8_t)(qp >> 8);
    bth[7] = (uint8_t)qp;
}

static void grow_buffers(int fd)
{
    int bytes = SOCKET_BUFFER_BYTES;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

/* ======================================================================== inboxes */

struct rv_inbox {
    pthread_mutex_t mu;
    uint32_t cap, head, tail;           /* tail - head datagrams queued, at buf[i % cap] */
    uint16_t *len;
    uint8_t *buf;
    int wake_fd, asleep;
    uint64_t dropped;
};

struct rv_inbox *rv_inbox_new(uint32_t capacity, int wake_fd)
{
    struct rv_inbox *in = calloc(1, sizeof *in);
    if (!in)
        return NULL;
    in->cap = capacity;
    in->wake_fd = wake_fd;
    in->len = calloc(capacity, sizeof *in->len);
    in->buf = malloc((size_t)capacity * MAX_DATAGRAM);
    pthread_mutex_init(&in->mu, NULL);
    if (!in->len || !in->buf) {
        rv_inbox_free(in);
        return NULL;
    }
    return in;
}

void rv_inbox_free(struct rv_inbox *in)
{
    if (!in)
        return;
    free(in->len);
    free(in->buf);
    pthread_mutex_destroy(&in->mu);
    free(in);
}

static void inbox_push(struct rv_inbox *in, const uint8_t *data, size_t len)
{
    pthread_mutex_lock(&in->mu);
    int wake = 0;
    if (in->tail - in->head == in->cap) {
        in->dropped++;                  /* its sender resends it */
    } else {
        uint32_t at = in->tail++ % in->cap;
        memcpy(in->buf + (size_t)at * MAX_DATAGRAM, data, len);
        in->len[at] = (uint16_t)len;
        wake = in->asleep;
        in->asleep = 0;
    }
    pthread_mutex_unlock(&in->mu);
    if (wake) {
        uint64_t one = 1;
        if (write(in->wake_fd, &one, sizeof one) < 0) { /* already readable */ }
    }
}

uint32_t rv_inbox_drain(struct rv_inbox *in, void (*take)(void *ctx, const uint8_t *data, size_t len), void *ctx)
{
    pthread_mutex_lock(&in->mu);
    uint32_t head = in->head, tail = in->tail;
    pthread_mutex_unlock(&in->mu);
    for (uint32_t i = head; i != tail; i++)     /* the reader writes only past tail */
        take(ctx, in->buf + (size_t)(i % in->cap) * MAX_DATAGRAM, in->len[i % in->cap]);
    pthread_mutex_lock(&in->mu);
    in->head = tail;
    pthread_mutex_unlock(&in->mu);
    return tail - head;
}

int rv_inbox_sleep(struct rv_inbox *in)
{
    pthread_mutex_lock(&in->mu);
    int empty = in->head == in->tail;
    in->asleep = empty;
    pthread_mutex_unlock(&in->mu);
    return empty;
}

void rv_inbox_awake(struct rv_inbox *in)
{
    pthread_mutex_lock(&in->mu);
    in->asleep = 0;
    pthread_mutex_unlock(&in->mu);
}

uint64_t rv_inbox_dropped(struct rv_inbox *in)
{
    pthread_mutex_lock(&in->mu);
    uint64_t n = in->dropped;
    pthread_mutex_unlock(&in->mu);
    return n;
}

/* ======================================================================== shared ports */

struct member {
    uint32_t group;
    struct rv_inbox *inbox;
};

struct rv_port {
    struct rv_port *next;
    uint32_t ip;
    int fd;
    pthread_mutex_t mu;                 /* members and counters */
    struct member *members;
    uint32_t n, cap;
    uint64_t malformed, unknown_group;
};

static struct rv_port *ports;

int rv_port_fd(struct rv_port *port) { return port->fd; }

void rv_port_lock(struct rv_port *port) { pthread_mutex_lock(&port->mu); }

void rv_port_unlock(struct rv_port *port) { pthread_mutex_unlock(&port->mu); }

void rv_port_dispatch(struct rv_port *port, uint32_t own, const uint8_t *data, size_t len,
                      void (*take)(void *ctx, const uint8_t *data, size_t len), void *ctx)
{
    if (len < RV_BTH_BYTES || data[0] != RV_OPCODE_SEND_ONLY) {
        port->malformed++;              /* not a BTH of ours (the agents' CNPs and reports among them) */
        return;
    }
    const uint8_t *packet = data + RV_BTH_BYTES;
    size_t plen = len - RV_BTH_BYTES;
    if (plen >= RV_GROUP_OFFSET + 4) {
        uint32_t group;
        memcpy(&group, packet + RV_GROUP_OFFSET, 4);
        group = be32toh(group);
        if (group == own) {
            take(ctx, packet, plen);
            return;
        }
        for (uint32_t i = 0; i < port->n; i++)
            if (port->members[i].group == group) {
                inbox_push(port->members[i].inbox, packet, plen);
                return;
            }
    }
    port->unknown_group++;              /* a group no transport of this process has (yet, or any more) */
}

static struct rv_port *port_open(uint32_t ip, char *error, uint32_t error_len)
{
    char name[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &ip, name, sizeof name);
    struct rv_port *port = calloc(1, sizeof *port);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons(RV_PORT), .sin_addr.s_addr = ip};
    if (!port || fd < 0) {
        snprintf(error, error_len, "cannot open the RoCEv2 port on %s: %s", name, strerror(errno));
        free(port);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    grow_buffers(fd);
    if (bind(fd, (struct sockaddr *)&at, sizeof at) < 0) {
        snprintf(error, error_len, "cannot bind UDP %s:%d (RoCEv2): %s", name, RV_PORT, strerror(errno));
        close(fd);
        free(port);
        return NULL;
    }
    int on = 1;
    setsockopt(fd, IPPROTO_UDP, UDP_GRO, &on, sizeof on);
    pthread_mutex_init(&port->mu, NULL);
    port->ip = ip;
    port->fd = fd;
    return port;
}

struct rv_port *rv_port_join(uint32_t ip, uint32_t group, struct rv_inbox *inbox, char *error, uint32_t error_len)
{
    pthread_mutex_lock(&registry);
    struct rv_port *port = ports;
    while (port && port->ip != ip)
        port = port->next;
    if (!port && (port = port_open(ip, error, error_len))) {
        port->next = ports;
        ports = port;
    }
    if (port) {
        pthread_mutex_lock(&port->mu);
        for (uint32_t i = 0; i < port->n; i++)
            if (port->members[i].group == group) {
                char name[INET_ADDRSTRLEN];
                inet_ntop(AF_INET, &ip, name, sizeof name);
                snprintf(error, error_len, "RoCEv2 transport: group %u already has a transport on %s", group, name);
                pthread_mutex_unlock(&port->mu);
                pthread_mutex_unlock(&registry);
                return NULL;
            }
        if (port->n == port->cap) {
            uint32_t cap = port->cap * 2 + 4;
            struct member *grown = realloc(port->members, cap * sizeof *grown);
            if (!grown) {
                snprintf(error, error_len, "no memory to join the RoCEv2 port");
                pthread_mutex_unlock(&port->mu);
                pthread_mutex_unlock(&registry);
                return NULL;
            }
            port->members = grown;
            port->cap = cap;
        }
        port->members[port->n++] = (struct member){.group = group, .inbox = inbox};
        pthread_mutex_unlock(&port->mu);
    }
    pthread_mutex_unlock(&registry);
    return port;
}

void rv_port_leave(struct rv_port *port, uint32_t group)
{
    pthread_mutex_lock(&registry);
    pthread_mutex_lock(&port->mu);
    for (uint32_t i = 0; i < port->n; i++)
        if (port->members[i].group == group) {
            port->members[i] = port->members[--port->n];
            break;
        }
    int last = port->n == 0;
    pthread_mutex_unlock(&port->mu);
    if (last) {                         /* closed before the registry lets go: the next join binds anew */
        for (struct rv_port **at = &ports; *at; at = &(*at)->next)
            if (*at == port) {
                *at = port->next;
                break;
            }
        close(port->fd);                /* no engine reads it any more: each left after its loop stopped */
        free(port->members);
        pthread_mutex_destroy(&port->mu);
        free(port);
    }
    pthread_mutex_unlock(&registry);
}

void rv_port_counts(struct rv_port *port, uint64_t *malformed, uint64_t *unknown_group)
{
    pthread_mutex_lock(&port->mu);
    *malformed = port->malformed;
    *unknown_group = port->unknown_group;
    pthread_mutex_unlock(&port->mu);
}

/* ======================================================================== rates */

struct rate {
    uint32_t flow;
    double bps;
};

struct rv_rates {
    struct rv_rates *next;
    uint16_t port;
    int fd, users;
    pthread_mutex_t mu;                 /* everything below */
    double polled;
    uint64_t messages, ignored;
    struct rate *rates;                 /* the rate last given per flow (a queue pair) */
    uint32_t n, cap;
};

static struct rv_rates *listeners;

struct rv_rates *rv_rates_join(uint16_t port, char *error, uint32_t error_len)
{
    pthread_mutex_lock(&registry);
    struct rv_rates *r = listeners;
    while (r && r->port != port)
        r = r->next;
    if (!r) {
        r = calloc(1, sizeof *r);
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (!r || fd < 0 || bind(fd, (struct sockaddr *)&at, sizeof at) < 0) {
            snprintf(error, error_len, "rate control port 127.0.0.1:%u: %s", port, strerror(errno));
            if (fd >= 0)
                close(fd);
            free(r);
            pthread_mutex_unlock(&registry);
            return NULL;
        }
        r->port = port;
        r->fd = fd;
        r->polled = -1;
        pthread_mutex_init(&r->mu, NULL);
        r->next = listeners;
        listeners = r;
    }
    r->users++;
    pthread_mutex_unlock(&registry);
    return r;
}

void rv_rates_leave(struct rv_rates *r)
{
    pthread_mutex_lock(&registry);
    if (--r->users == 0) {
        for (struct rv_rates **at = &listeners; *at; at = &(*at)->next)
            if (*at == r) {
                *at = r->next;
                break;
            }
        close(r->fd);
        free(r->rates);
        pthread_mutex_destroy(&r->mu);
        free(r);
    }
    pthread_mutex_unlock(&registry);
}

static void set_rate(struct rv_rates *r, uint32_t flow, double bps)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (r->rates[i].flow == flow) {
            r->rates[i].bps = bps;      /* a later message wins */
            return;
        }
    if (r->n == r->cap) {
        struct rate *grown = realloc(r->rates, (r->cap * 2 + 8) * sizeof *grown);
        if (!grown)
            return;
        r->rates = grown;
        r->cap = r->cap * 2 + 8;
    }
    r->rates[r->n++] = (struct rate){.flow = flow, .bps = bps};
}

double rv_rate(struct rv_rates *r, uint32_t qp, double now)
{
    pthread_mutex_lock(&r->mu);
    if (now - r->polled >= RV_RATE_POLL_S) {
        r->polled = now;
        uint8_t m[64];
        for (int i = 0; i < MAX_RATE_MESSAGES; i++) {
            ssize_t len = recv(r->fd, m, sizeof m, MSG_DONTWAIT);
            if (len < 0)
                break;
            uint32_t flow;
            uint64_t bits;
            double bps;
            memcpy(&flow, m + 4, 4);
            memcpy(&bits, m + 8, 8);
            bits = be64toh(bits);
            memcpy(&bps, &bits, 8);
            if (len != RATE_MESSAGE_BYTES || memcmp(m, "HARC", 4) != 0 || !(bps > 0)) {
                r->ignored++;
                continue;
            }
            set_rate(r, be32toh(flow), bps);
            r->messages++;
        }
    }
    double bps = 0;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->rates[i].flow == qp)
            bps = r->rates[i].bps;
    pthread_mutex_unlock(&r->mu);
    return bps;
}

uint64_t rv_rate_messages(struct rv_rates *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t n = r->messages;
    pthread_mutex_unlock(&r->mu);
    return n;
}
