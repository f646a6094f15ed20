/* The replication engine's control side: multicast groups and clone (mirror) sessions, each a
 * list of (port, replica id) copies, written by the Python side (ctypes, under the data plane's
 * lock) and read by the loop when a packet is multicast or cloned (dataplane.c). */
#define _GNU_SOURCE                /* struct mmsghdr (state.h) */
#include <stdlib.h>
#include <string.h>

#include "state.h"

static replicas *replicas_new(uint32_t n, const uint32_t *ports, const uint32_t *rids, uint32_t truncate) {
    replicas *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->ports = malloc((n ? n : 1) * sizeof(uint32_t));
    r->rids = malloc((n ? n : 1) * sizeof(uint32_t));
    if (!r->ports || !r->rids) { free(r->ports); free(r->rids); free(r); return NULL; }
    r->n = n;
    r->truncate = truncate;
    if (n) { memcpy(r->ports, ports, n * sizeof(uint32_t)); memcpy(r->rids, rids, n * sizeof(uint32_t)); }
    return r;
}

static void replicas_free(replicas *r) {
    if (!r) return;
    free(r->ports);
    free(r->rids);
    free(r);
}

/* entry i of a table of max + 1 (groups or sessions) replaced by a copy of these replicas */
static int put(replicas **table, uint32_t max, uint32_t i, uint32_t n, const uint32_t *ports, const uint32_t *rids,
               uint32_t truncate) {
    if (i > max) return -1;
    replicas *r = replicas_new(n, ports, rids, truncate);
    if (!r) return -1;
    replicas_free(table[i]);
    table[i] = r;
    return 0;
}

static void drop(replicas **table, uint32_t max, uint32_t i) {
    if (i > max) return;
    replicas_free(table[i]);
    table[i] = NULL;
}

int ss_dp_set_group(ss_dataplane *dp, uint32_t group, uint32_t n, const uint32_t *ports, const uint32_t *rids) {
    return group < 1 ? -1 : put(dp->groups, MAX_GROUP, group, n, ports, rids, 0);
}

void ss_dp_delete_group(ss_dataplane *dp, uint32_t group) { drop(dp->groups, MAX_GROUP, group); }

int ss_dp_set_session(ss_dataplane *dp, uint32_t session, uint32_t n, const uint32_t *ports,
                      const uint32_t *rids, uint32_t truncate_length) {
    return put(dp->sessions, MAX_SESSION, session, n, ports, rids, truncate_length);
}

void ss_dp_delete_session(ss_dataplane *dp, uint32_t session) { drop(dp->sessions, MAX_SESSION, session); }

void ss_dp_clear_replication(ss_dataplane *dp) {
    for (int i = 0; i <= MAX_GROUP; i++) ss_dp_delete_group(dp, (uint32_t)i);
    for (int i = 0; i <= MAX_SESSION; i++) ss_dp_delete_session(dp, (uint32_t)i);
}
