/* The collectives' reliable transport, natively (hostpath.h says what and why). reliable.py is the
 * reference: every rule here is one of its rules, on the same bytes. */
#define _GNU_SOURCE
#include "engine.h"

#include <endian.h>
#include <errno.h>
#include <math.h>
#include <netinet/udp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ======================================================================== the wire */

static void put16(uint8_t *p, uint16_t v) { v = htobe16(v); memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return be16toh(v); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }

void wire_pack(uint8_t *p, const struct header *h)
{
    p[0] = 'C';
    p[1] = 'L';
    p[2] = h->kind;
    put32(p + 3, h->group);
    put16(p + 7, h->src);
    put32(p + 9, h->seq);
    put64(p + 13, h->tag);
    put32(p + 21, h->frag);
    put32(p + 25, h->count);
}

/* 0, or -1 for a datagram that is not one of ours (too short, another magic) */
static int wire_unpack(const uint8_t *p, size_t len, struct header *h)
{
    if (len < HP_HEADER_BYTES || p[0] != 'C' || p[1] != 'L')
        return -1;
    h->kind = p[2];
    h->group = get32(p + 3);
    h->src = get16(p + 7);
    h->seq = get32(p + 9);
    h->tag = get64(p + 13);
    h->frag = get32(p + 21);
    h->count = get32(p + 25);
    return 0;
}

/* A DATA fragment as our senders cut them: fragment < fragments, every one but the last full. */
static int fragment_fits(uint32_t frag, uint32_t count, size_t len)
{
    return count >= 1 && frag < count && len <= HP_PAYLOAD && (frag == count - 1 || len == HP_PAYLOAD);
}

/* ======================================================================== peers and windows */

static void rto_sample(struct rto *r, double rtt)
{
    if (!r->sampled) {
        r->srtt = rtt;
        r->rttvar = rtt / 2;
        r->sampled = 1;
    } else {
        r->rttvar = 0.75 * r->rttvar + 0.25 * fabs(r->srtt - rtt);
        r->srtt = 0.875 * r->srtt + 0.125 * rtt;
    }
    r->rto = fmin(fmax(r->floor, r->srtt + 4 * r->rttvar), r->cap);
}

/* the wait before resending a packet resent `retries` times already (doubling, capped) */
static double rto_timeout(const struct rto *r, uint32_t retries)
{
    return fmin(ldexp(r->rto, retries > 30 ? 30 : (int)retries), r->cap);
}

static int seen(const struct peer *p, uint32_t seq)
{
    uint32_t i = seq & (HP_REORDER - 1);
    return (p->seen[i >> 6] >> (i & 63)) & 1;
}

static void mark_seen(struct peer *p, uint32_t seq, int on)
{
    uint32_t i = seq & (HP_REORDER - 1);
    if (on)
        p->seen[i >> 6] |= 1ull << (i & 63);
    else
        p->seen[i >> 6] &= ~(1ull << (i & 63));
}

/* a fresh seq from this source: taken, and the floor moved past every seq now contiguous */
static void take_seq(struct peer *p, uint32_t seq)
{
    mark_seen(p, seq, 1);
    p->above++;
    if (seq + 1 > p->top)
        p->top = seq + 1;
    while (p->above && seen(p, p->floor)) {
        mark_seen(p, p->floor, 0);
        p->floor++;
        p->above--;
    }
    if (!p->above)
        p->top = p->floor;
}

/* the next seq taken above the floor from `seq` on (below top), or top */
static uint32_t next_seen(const struct peer *p, uint32_t seq)
{
    while (seq < p->top) {
        uint32_t i = seq & (HP_REORDER - 1);
        uint64_t word = p->seen[i >> 6] >> (i & 63);
        if (word)
            return seq + (uint32_t)__builtin_ctzll(word) < p->top ? seq + (uint32_t)__builtin_ctzll(word) : p->top;
        seq += 64 - (i & 63);
    }
    return p->top;
}

double hp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int hp_version(void) { return HP_VERSION; }

struct timespec abs_time(double t)
{
    struct timespec ts;
    if (t < 0)
        t = 0;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static double uniform(uint64_t *s)     /* splitmix64: [0, 1) */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

int out_init(struct out *o, uint32_t cap, uint32_t scratch_cap)
{
    o->cap = cap;
    o->scratch_cap = scratch_cap;
    o->iov = calloc(2 * (size_t)cap, sizeof *o->iov);
    o->dst = calloc(cap, sizeof *o->dst);
    o->mm = calloc(cap, sizeof *o->mm);
    o->first = calloc(cap, sizeof *o->first);
    o->ctl = calloc(cap, sizeof *o->ctl);
    o->scratch = scratch_cap ? malloc((size_t)scratch_cap * HP_MAX_DATAGRAM) : NULL;
    return o->iov && o->dst && o->mm && o->first && o->ctl && (o->scratch || !scratch_cap) ? 0 : -1;
}

void out_release(struct out *o)
{
    free(o->iov);
    free(o->dst);
    free(o->mm);
    free(o->first);
    free(o->ctl);
    free(o->scratch);
}

static uint8_t *out_scratch(struct out *o)
{
    return o->scratch_used < o->scratch_cap ? o->scratch + (size_t)o->scratch_used++ * HP_MAX_DATAGRAM : NULL;
}

static int out_full(const struct out *o) { return o->n == o->cap; }

/* rocev2: how long the rate of dst's queue pair still holds a datagram back (0: it may go) */
static double pace_wait(struct hp_engine *e, struct peer *p, double now)
{
    if (!e->rates || rv_rate(e->rates, p->qp, now) <= 0 || p->next_free <= now + PACE_SLACK_S) {
        if (p->held_since >= 0) {
            e->stats.rocev2_paced_s += now - p->held_since;
            p->held_since = -1;
        }
        return 0;
    }
    if (p->held_since < 0)
        p->held_since = now;
    return p->next_free - PACE_SLACK_S - now;
}

/* rocev2: a datagram of `len` bytes after the BTH takes its queue pair's rate for its frame's time */
static void pace_charge(struct hp_engine *e, struct peer *p, uint32_t len)
{
    double now = hp_now(), bps = rv_rate(e->rates, p->qp, now);
    if (bps > 0)
        p->next_free = fmax(now, p->next_free) + (double)(RV_BTH_BYTES + len + RV_FRAME_OVERHEAD) * 8 / bps;
}

/* one datagram to rank dst, counted as sent; the seeded knob may drop it here */
void out_add(struct hp_engine *e, struct out *o, int32_t dst, const uint8_t *data, uint32_t len)
{
    e->stats.packets_sent++;
    e->stats.bytes_sent += len;
    if (e->rates)
        pace_charge(e, &e->peers[dst], len);
    if (e->cfg.drop_outgoing > 0 && uniform(&e->rng) < e->cfg.drop_outgoing) {
        e->stats.dropped_on_purpose++;
        return;
    }
    if (out_full(o)) {          /* never: the capacity covers a whole iteration */
        e->stats.send_errors++;
        return;
    }
    o->iov[2 * o->n] = (struct iovec){.iov_base = e->peers[dst].bth, .iov_len = e->cfg.rocev2 ? RV_BTH_BYTES : 0};
    o->iov[2 * o->n + 1] = (struct iovec){.iov_base = (void *)data, .iov_len = len};
    o->dst[o->n++] = dst;
}

static size_t datagram_len(const struct out *o, uint32_t i)
{
    return o->iov[2 * i].iov_len + o->iov[2 * i + 1].iov_len;
}

/* the datagrams from `i` on that can leave in one GSO send: to the same loopback peer, every
 * one but the last as long as the first (the kernel cuts the train at that length) */
static uint32_t gso_train(const struct hp_engine *e, const struct out *o, uint32_t i)
{
    if (!e->gso || !e->peers[o->dst[i]].loopback)
        return 1;
    size_t seg = datagram_len(o, i), total = seg;
    uint32_t k = 1;
    while (i + k < o->n && k < GSO_MAX && o->dst[i + k] == o->dst[i] && datagram_len(o, i + k) <= seg &&
           total + datagram_len(o, i + k) <= 65507 - 8) {
        total += datagram_len(o, i + k);
        if (datagram_len(o, i + k++) < seg)
            break;              /* a shorter one ends a train */
    }
    return k;
}

/* the sends of what was built: one a datagram, or a GSO train */
static uint32_t out_plan(const struct hp_engine *e, struct out *o)
{
    uint32_t sends = 0;
    for (uint32_t i = 0; i < o->n; sends++) {
        uint32_t k = gso_train(e, o, i);
        struct msghdr *h = &o->mm[sends].msg_hdr;
        *h = (struct msghdr){.msg_name = (void *)&e->peers[o->dst[i]].addr, .msg_namelen = sizeof(struct sockaddr_in),
                             .msg_iov = &o->iov[2 * i], .msg_iovlen = 2 * k};
        if (k > 1) {
            h->msg_control = o->ctl[sends];
            h->msg_controllen = sizeof o->ctl[sends];
            struct cmsghdr *c = CMSG_FIRSTHDR(h);
            c->cmsg_level = SOL_UDP;
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t seg = (uint16_t)datagram_len(o, i);
            memcpy(CMSG_DATA(c), &seg, sizeof seg);
        }
        o->first[sends] = i;
        i += k;
    }
    return sends;
}

/* send what was built (without the lock); a datagram the socket refuses counts as a send error,
 * a GSO train the kernel refuses goes again datagram by datagram, and GSO stays off */
void out_send(struct hp_engine *e, struct out *o)
{
    uint32_t sends = out_plan(e, o), done = 0;
    while (done < sends) {
        int r = sendmmsg(e->fd, o->mm + done, sends - done, 0);
        if (r >= 0) {
            done += (uint32_t)r;
            continue;
        }
        if (errno == EINTR)
            continue;
        struct msghdr *h = &o->mm[done].msg_hdr;
        if (h->msg_iovlen > 2 && errno != ECONNREFUSED && errno != EHOSTUNREACH && errno != ENETUNREACH) {
            e->gso = 0;         /* no GSO here: one by one, and never again */
            for (size_t j = 0; j < h->msg_iovlen; j += 2) {
                struct msghdr one = {.msg_name = h->msg_name, .msg_namelen = h->msg_namelen,
                                     .msg_iov = &h->msg_iov[j], .msg_iovlen = 2};
                if (sendmsg(e->fd, &one, 0) < 0)
                    __atomic_add_fetch(&e->stats.send_errors, 1, __ATOMIC_RELAXED);
            }
        } else {                /* unreachable right now: the resend timer tries again */
            __atomic_add_fetch(&e->stats.send_errors, h->msg_iovlen / 2, __ATOMIC_RELAXED);
        }
        done++;
    }
    o->n = 0;
    o->scratch_used = 0;
}

void note_abort(struct hp_engine *e, uint64_t call, int32_t by, const char *reason, uint32_t len)
{
    for (uint32_t i = 0; i < e->naborts; i++)
        if (e->aborts[i].call == call)
            return;             /* the first word on a call stands */
    if (e->naborts == e->aborts_cap) {
        uint32_t cap = e->aborts_cap ? 2 * e->aborts_cap : 4;
        struct abort_note *grown = realloc(e->aborts, cap * sizeof *grown);
        if (!grown)
            return;
        e->aborts = grown;
        e->aborts_cap = cap;
    }
    struct abort_note *a = &e->aborts[e->naborts++];
    a->call = call;
    a->by = by;
    a->len = len > HP_PAYLOAD ? HP_PAYLOAD : len;
    memcpy(a->reason, reason, a->len);
    e->wake_callers = 1;
}

/* ---- acknowledgements, received packets ---- */

static void send_ack(struct hp_engine *e, int32_t src)
{
    struct peer *p = &e->peers[src];
    uint8_t *pkt = out_scratch(&e->out);
    if (!pkt)
        return;                 /* still owed: the delay timer sends it */
    p->owed = 0;
    struct header h = {.kind = HP_ACK, .group = e->cfg.group, .src = (uint16_t)e->cfg.rank, .seq = p->floor};
    wire_pack(pkt, &h);
    uint32_t n = 0;
    for (uint32_t s = next_seen(p, p->floor + 1); s < p->top && n < HP_MAX_SACKS; s = next_seen(p, s + 1))
        put32(pkt + HP_HEADER_BYTES + HP_SACK_BYTES * n++, s);
    out_add(e, &e->out, src, pkt, HP_HEADER_BYTES + HP_SACK_BYTES * n);
}

static void release(struct peer *p, uint32_t seq, double *newest_once)
{
    struct slot *s = &p->slots[seq & p->mask];
    if (!s->live || s->seq != seq)
        return;
    s->live = 0;
    p->pending--;
    if (s->retries == 0 && s->sent_at > *newest_once)
        *newest_once = s->sent_at;      /* Karn: a resent packet's answer times nothing */
}

static void take_ack(struct hp_engine *e, struct peer *p, uint32_t floor, const uint8_t *body, size_t len, double now)
{
    if (!p->slots)
        return;
    double newest_once = -1;
    uint32_t end = floor < p->next_seq ? floor : p->next_seq;
    for (uint32_t s = p->low; s < end; s++)
        release(p, s, &newest_once);
    for (size_t off = 0; off + HP_SACK_BYTES <= len; off += HP_SACK_BYTES) {
        uint32_t s = get32(body + off);
        if (s >= p->low && s < p->next_seq)
            release(p, s, &newest_once);
    }
    while (p->low != p->next_seq && !p->slots[p->low & p->mask].live)
        p->low++;
    if (newest_once >= 0) {
        double before = p->rto.rto;
        rto_sample(&p->rto, now - newest_once);
        if (p->rto.rto < before)
            e->next_resend = now;       /* some packet may be due sooner than planned */
    }
    if (!p->pending)
        e->wake_callers = 1;            /* a flush may be waiting for this */
}

static void take_data(struct hp_engine *e, const struct header *h, const uint8_t *body, size_t len, double now)
{
    struct peer *p = &e->peers[h->src];
    if (!fragment_fits(h->frag, h->count, len)) {
        e->stats.stale++;
        return;
    }
    if (h->seq >= p->floor && h->seq - p->floor >= HP_REORDER) {
        e->stats.out_of_reach++;        /* not taken, not owed: its resend will be */
        return;
    }
    int fresh = !(h->seq < p->floor || seen(p, h->seq));
    if (!fresh) {
        e->stats.duplicates++;          /* a copy: the sender is resending, so acknowledge at once */
    } else {
        struct msg *m = msg_for(e->table, h->src, h->tag, h->frag, h->count);
        if (!m) {
            e->stats.stale++;
            return;
        }
        take_seq(p, h->seq);
        if (msg_put(m, h->frag, body, len))
            e->wake_callers = 1;
    }
    if (!p->owed)
        p->owed_since = now;
    p->owed++;
    if (!fresh || p->owed >= HP_ACK_EVERY)
        send_ack(e, h->src);
}

static void take(struct hp_engine *e, const uint8_t *data, size_t len, double now)
{
    struct header h;
    e->stats.packets_received++;
    e->stats.bytes_received += len;
    if (wire_unpack(data, len, &h) < 0 || h.group != e->cfg.group || h.src >= e->cfg.world || h.src == e->cfg.rank) {
        e->stats.stale++;
        return;
    }
    struct peer *p = &e->peers[h.src];
    p->heard = now;
    const uint8_t *body = data + HP_HEADER_BYTES;
    size_t blen = len - HP_HEADER_BYTES;
    switch (h.kind) {
    case HP_ACK:
        take_ack(e, p, h.seq, body, blen, now);
        break;
    case HP_ABORT:
        note_abort(e, h.tag, h.src, (const char *)body, (uint32_t)blen);
        break;
    case HP_HEARTBEAT:
        break;                  /* being heard is all it is for */
    case HP_DATA:
        take_data(e, &h, body, blen, now);
        break;
    default:
        e->stats.stale++;
    }
}

/* ---- the callers' messages into their windows ---- */

static int window_open(const struct hp_engine *e, const struct peer *p)
{
    return p->pending < (uint32_t)e->cfg.window && p->next_seq - p->low <= p->mask;
}

static void pump(struct hp_engine *e, double now)
{
    e->pump_again = 0;
    for (int32_t dst = 0; dst < e->cfg.world; dst++) {
        struct peer *p = &e->peers[dst];
        while (p->jobs && window_open(e, p) && !(e->rates && pace_wait(e, p, now) > 0)) {
            if (out_full(&e->out)) {
                e->pump_again = 1;
                return;
            }
            struct job *j = p->jobs;
            uint32_t frag = j->next_frag++;
            uint64_t off = (uint64_t)frag * HP_PAYLOAD;
            uint32_t blen = (uint32_t)(j->len - off < HP_PAYLOAD ? j->len - off : HP_PAYLOAD);
            struct slot *s = &p->slots[p->next_seq & p->mask];
            struct header h = {.kind = HP_DATA, .group = e->cfg.group, .src = (uint16_t)e->cfg.rank,
                               .seq = p->next_seq++, .tag = j->tag, .frag = frag, .count = j->count};
            wire_pack(s->packet, &h);
            memcpy(s->packet + HP_HEADER_BYTES, j->data + off, blen);
            s->live = 1;
            s->seq = h.seq;
            s->len = (uint16_t)(HP_HEADER_BYTES + blen);
            s->retries = 0;
            s->sent_at = now;
            p->pending++;
            if (now + rto_timeout(&p->rto, 0) < e->next_resend)
                e->next_resend = now + rto_timeout(&p->rto, 0);
            out_add(e, &e->out, dst, s->packet, s->len);
            if (j->next_frag == j->count) {     /* all of it in flight: its caller may go */
                p->jobs = j->next;
                if (!p->jobs)
                    p->jobs_tail = &p->jobs;
                j->done = 1;
                e->wake_callers = 1;
            }
        }
    }
}

/* ======================================================================== timers */

static void resend_late(struct hp_engine *e, double now)
{
    double next = INFINITY;
    for (int32_t dst = 0; dst < e->cfg.world; dst++) {
        struct peer *p = &e->peers[dst];
        for (uint32_t seq = p->low; p->pending && seq != p->next_seq; seq++) {
            struct slot *s = &p->slots[seq & p->mask];
            if (!s->live)
                continue;
            if (now - s->sent_at > rto_timeout(&p->rto, s->retries)) {
                double held = e->rates ? pace_wait(e, p, now) : 0;
                if (held > 0) {         /* its queue pair's rate first */
                    next = fmin(next, now + held);
                    continue;
                }
                if (out_full(&e->out)) {
                    next = now;         /* the rest in the next iteration */
                    break;
                }
                s->retries++;
                s->sent_at = now;
                e->stats.retransmissions++;
                out_add(e, &e->out, dst, s->packet, s->len);
            }
            if (s->sent_at + rto_timeout(&p->rto, s->retries) < next)
                next = s->sent_at + rto_timeout(&p->rto, s->retries);
        }
    }
    e->next_resend = next;
}

static void timers(struct hp_engine *e, double now)
{
    for (int32_t src = 0; src < e->cfg.world; src++) {
        struct peer *p = &e->peers[src];
        if (p->owed && now - p->owed_since >= e->ack_delay_s)
            send_ack(e, src);
    }
    if (now >= e->next_resend)
        resend_late(e, now);
    if (now - e->last_beat > HP_HEARTBEAT_S) {
        uint8_t *pkt = out_scratch(&e->out);
        if (pkt) {
            e->last_beat = now;
            struct header h = {.kind = HP_HEARTBEAT, .group = e->cfg.group, .src = (uint16_t)e->cfg.rank};
            wire_pack(pkt, &h);
            for (int32_t r = 0; r < e->cfg.world; r++)
                if (r != e->cfg.rank)
                    out_add(e, &e->out, r, pkt, HP_HEADER_BYTES);
        }
    }
}

/* seconds until the loop has something to do without a packet (0: now) */
static double next_event(const struct hp_engine *e, double now)
{
    if (e->pump_again || e->out.n)
        return 0;
    double at = fmin(e->last_beat + HP_HEARTBEAT_S, e->next_resend);
    for (int32_t r = 0; r < e->cfg.world; r++) {
        const struct peer *p = &e->peers[r];
        if (p->jobs && window_open(e, p)) {
            if (!e->rates || p->next_free <= now + PACE_SLACK_S)
                return 0;       /* a caller's message came while the loop was sending */
            at = fmin(at, p->next_free - PACE_SLACK_S);     /* its queue pair's rate lets it go then */
        }
        if (p->owed)
            at = fmin(at, p->owed_since + e->ack_delay_s);
    }
    return fmax(0, fmin(at - now, LONGEST_WAIT_S));
}

/* ======================================================================== the loop */

/* one received buffer: a datagram, or a GRO train of datagrams of the size its cmsg gives; each
 * datagram to one(ctx, ...) */
static void split_train(struct mmsghdr *m, void (*one)(void *ctx, const uint8_t *data, size_t len), void *ctx)
{
    const uint8_t *data = m->msg_hdr.msg_iov->iov_base;
    size_t len = m->msg_len, seg = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m->msg_hdr); c; c = CMSG_NXTHDR(&m->msg_hdr, c))
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int size;
            memcpy(&size, CMSG_DATA(c), sizeof size);
            seg = size > 0 ? (size_t)size : 0;
        }
    if (!seg) {                 /* one datagram: read as far as reliable.py's MAX_DATAGRAM */
        one(ctx, data, len < HP_MAX_DATAGRAM ? len : HP_MAX_DATAGRAM);
        return;
    }
    for (size_t off = 0; off < len; off += seg)
        one(ctx, data + off, len - off < seg ? len - off : seg);
}

static void take_now(void *engine, const uint8_t *data, size_t len)
{
    struct hp_engine *e = engine;
    take(e, data, len, e->now);
}

/* rocev2: a datagram from the shared port: ours taken, another group's queued for it */
static void take_framed(void *engine, const uint8_t *data, size_t len)
{
    struct hp_engine *e = engine;
    rv_port_dispatch(e->port, e->cfg.group, data, len, take_now, e);
}

/* a batch from `fd` into the receive buffers (the lock let go meanwhile): how many */
static int receive(struct hp_engine *e, int fd)
{
    for (int i = 0; i < HP_RX_BATCH; i++)
        e->rx_mm[i].msg_hdr.msg_controllen = sizeof e->rx_ctl[i];
    pthread_mutex_unlock(&e->mu);
    int n = recvmmsg(fd, e->rx_mm, HP_RX_BATCH, MSG_DONTWAIT, NULL);
    pthread_mutex_lock(&e->mu);
    e->now = hp_now();
    return n;
}

void *hp_engine_loop(void *arg)
{
    struct hp_engine *e = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);     /* signals are the Python main thread's */
    int more = 0;               /* the last read filled its batch: read again before sleeping */
    pthread_mutex_lock(&e->mu);
    while (!e->closing) {
        double wait = more ? 0 : next_event(e, hp_now());
        if (wait > 0 && e->inbox && !rv_inbox_sleep(e->inbox))
            wait = 0;           /* the shared port queued something meanwhile */
        if (wait > 0) {
            e->asleep = 1;
            pthread_mutex_unlock(&e->mu);
            struct pollfd fds[3] = {{.fd = e->port ? -1 : e->fd, .events = POLLIN}, {.fd = e->wake_fd, .events = POLLIN},
                                    {.fd = e->port ? rv_port_fd(e->port) : -1, .events = POLLIN}};
            struct timespec ts = abs_time(wait);
            ppoll(fds, 3, &ts, NULL);
            if (fds[1].revents & POLLIN) {
                uint64_t v;
                if (read(e->wake_fd, &v, sizeof v) < 0) { /* nothing to drain */ }
            }
            pthread_mutex_lock(&e->mu);
            e->asleep = 0;
            if (e->inbox)
                rv_inbox_awake(e->inbox);
            if (e->closing)
                break;
        }
        int n = e->port ? 0 : receive(e, e->fd);      /* rocev2: nothing comes to the group's own port */
        more = n == HP_RX_BATCH;
        for (int i = 0; i < n; i++)
            split_train(&e->rx_mm[i], take_now, e);
        if (e->port) {          /* rocev2: the shared port 4791, read by whichever of its engines wakes */
            n = receive(e, rv_port_fd(e->port));
            more |= n == HP_RX_BATCH;
            rv_port_lock(e->port);
            for (int i = 0; i < n; i++)
                split_train(&e->rx_mm[i], take_framed, e);
            rv_port_unlock(e->port);
            rv_inbox_drain(e->inbox, take_now, e);
        }
        double now = e->now;
        pump(e, now);
        timers(e, now);
        if (e->wake_callers && e->waiters) {
            e->stats.wakeups++;
            pthread_cond_broadcast(&e->cv);
        }
        e->wake_callers = 0;
        e->stats.loops++;
        if (e->out.n) {
            pthread_mutex_unlock(&e->mu);       /* slots are this thread's alone: safe to read unlocked */
            out_send(e, &e->out);
            pthread_mutex_lock(&e->mu);
        }
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}
