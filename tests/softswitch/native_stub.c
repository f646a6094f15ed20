/* A hand-written stand-in for a program's generated native pipeline (softswitch/native/abi.h),
 * for the native data plane's tests: an Ethernet header, a user field `tag` and a `mark`, and
 * rules the test sets by ingress port (and, for resubmitted/recirculated packets, by instance
 * type) that say where a packet goes and what it asks of the data plane (multicast, clone,
 * resubmit, recirculate, priority, truncation, a failure status). Egress writes what the packet
 * carried into the source MAC, so a test reads a copy's instance type, rid, tag, mark, egress
 * port and queue from the frame that left. A packet's ingress counts it by ingress port. */
#include <stdlib.h>
#include <string.h>

#include "abi.h"

#define DROP_PORT 511

typedef struct stub_rule {
    int32_t egress;               /* egress_spec */
    uint32_t mcast, clone_session, clone_list, resubmit_list, recirculate_list;
    uint32_t priority, status, truncate, tag, mark;
} stub_rule;

struct ss_objects {
    stub_rule in[SS_MAX_PORTS];   /* by ingress port, for instance type NORMAL */
    stub_rule internal[8];        /* by instance type, for the others entering ingress */
    stub_rule out[SS_MAX_PORTS];  /* egress, by egress port, for instance type NORMAL */
    uint64_t count[SS_MAX_PORTS]; /* packets through ingress, by ingress port */
};

typedef struct stub_state {
    ss_u128 wide;                 /* a 128-bit field, as a generated state has: 16-byte aligned */
    uint64_t meta[SS_META_COUNT];
    uint64_t tag, mark;
    uint8_t eth[14];
    uint8_t eth_valid;
} stub_state;

size_t ss_state_size(void) { return sizeof(stub_state); }
void ss_state_init(void *st) { memset(st, 0, sizeof(stub_state)); }
int ss_has(int meta) { return meta >= 0 && meta < SS_META_COUNT; }

uint64_t ss_meta_mask(int meta) {
    switch (meta) {
    case SS_INGRESS_GLOBAL_TIMESTAMP: case SS_EGRESS_GLOBAL_TIMESTAMP: return (1ULL << 48) - 1;
    case SS_ENQ_TIMESTAMP: case SS_DEQ_TIMEDELTA: case SS_PACKET_LENGTH: return 0xFFFFFFFFULL;
    case SS_INGRESS_PORT: case SS_EGRESS_SPEC: case SS_EGRESS_PORT: return 0x1FF;
    default: return ~0ULL;
    }
}

uint64_t ss_get(const void *st, int meta) { return ((const stub_state *)st)->meta[meta]; }
void ss_set(void *st, int meta, uint64_t v) { ((stub_state *)st)->meta[meta] = v & ss_meta_mask(meta); }

int ss_parse(ss_objects *o, void *st, const uint8_t *frame, uint32_t len, uint32_t *consumed) {
    (void)o;
    stub_state *s = st;
    if ((uintptr_t)st % _Alignof(ss_u128)) return SS_ERR_UNSUPPORTED;   /* the data plane misaligned it */
    if (len < 14) {                       /* PacketTooShort */
        s->meta[SS_PARSER_ERROR] = 1;
        *consumed = 0;
        return SS_OK;
    }
    memcpy(s->eth, frame, 14);
    s->eth_valid = 1;
    s->mark = 0x5A;                       /* metadata a parser sets: a clone's reset must clear it */
    *consumed = 14;
    return SS_OK;
}

int ss_verify_checksums(ss_objects *o, void *st, int *ok) { (void)o; (void)st; *ok = 1; return SS_OK; }

int ss_ingress(ss_objects *o, void *st) {
    stub_state *s = st;
    uint64_t port = s->meta[SS_INGRESS_PORT], type = s->meta[SS_INSTANCE_TYPE];
    o->count[port]++;
    if (s->meta[SS_PARSER_ERROR]) { s->meta[SS_EGRESS_SPEC] = DROP_PORT; return SS_OK; }
    const stub_rule *r = type ? &o->internal[type & 7] : &o->in[port];
    if (r->status) return (int)r->status;
    s->meta[SS_EGRESS_SPEC] = (uint64_t)r->egress & 0x1FF;
    s->meta[SS_MCAST_GRP] = r->mcast;
    s->meta[SS_PRIORITY] = r->priority;
    if (r->tag) s->tag = r->tag;
    s->mark = r->mark;
    if (r->clone_session) { s->meta[SS_CLONE_SESSION] = r->clone_session; s->meta[SS_CLONE_FIELD_LIST] = r->clone_list; }
    if (r->resubmit_list) s->meta[SS_RESUBMIT_FIELD_LIST] = r->resubmit_list;
    if (r->truncate) s->meta[SS_TRUNCATE_LENGTH] = r->truncate;
    return SS_OK;
}

int ss_egress(ss_objects *o, void *st) {
    stub_state *s = st;
    uint64_t port = s->meta[SS_EGRESS_PORT];
    if (s->meta[SS_INSTANCE_TYPE] == 0) {
        const stub_rule *r = &o->out[port];
        if (r->status) return (int)r->status;
        if (r->egress == DROP_PORT) s->meta[SS_EGRESS_SPEC] = DROP_PORT;
        if (r->clone_session) { s->meta[SS_CLONE_SESSION] = r->clone_session; s->meta[SS_CLONE_FIELD_LIST] = r->clone_list; }
        if (r->recirculate_list) s->meta[SS_RECIRCULATE_FIELD_LIST] = r->recirculate_list;
        if (r->truncate) s->meta[SS_TRUNCATE_LENGTH] = r->truncate;
    }
    if (s->eth_valid) {                   /* what the packet carried, for the test to read */
        s->eth[6] = (uint8_t)s->meta[SS_INSTANCE_TYPE];
        s->eth[7] = (uint8_t)s->meta[SS_EGRESS_RID];
        s->eth[8] = (uint8_t)s->tag;
        s->eth[9] = (uint8_t)s->mark;
        s->eth[10] = (uint8_t)port;
        s->eth[11] = (uint8_t)s->meta[SS_QID];
    }
    return SS_OK;
}

int ss_update_checksums(ss_objects *o, void *st) { (void)o; (void)st; return SS_OK; }

int ss_deparse(ss_objects *o, const void *st, uint8_t *out, uint32_t cap, uint32_t *written) {
    (void)o;
    const stub_state *s = st;
    *written = 0;
    if (!s->eth_valid) return SS_OK;
    if (cap < 14) return SS_ERR_TOO_LONG;
    memcpy(out, s->eth, 14);
    *written = 14;
    return SS_OK;
}

/* field list 1: tag; 2: tag and mark */
void ss_copy_field_list(int id, const void *src, void *dst) {
    const stub_state *a = src;
    stub_state *b = dst;
    if (id == 1 || id == 2) b->tag = a->tag;
    if (id == 2) b->mark = a->mark;
}

void ss_clear_metadata(void *st) {
    stub_state *s = st;
    for (int m = SS_INGRESS_PORT; m <= SS_QID; m++) s->meta[m] = 0;
    s->tag = s->mark = 0;
}

ss_objects *ss_objects_new(void) { return calloc(1, sizeof(ss_objects)); }
void ss_objects_free(ss_objects *o) { free(o); }

/* the test's control */
stub_rule *stub_in_rule(ss_objects *o, int port) { return &o->in[port]; }
stub_rule *stub_internal_rule(ss_objects *o, int type) { return &o->internal[type & 7]; }
stub_rule *stub_out_rule(ss_objects *o, int port) { return &o->out[port]; }
uint64_t stub_count(ss_objects *o, int port) { return o->count[port]; }
