/* softswitch's native run-time objects (objects.h): tables, profiles, registers, counters,
 * meters, hashes; the control functions of abi.h that Python (native/objects.py) calls. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "objects.h"

static void *ss_zalloc(size_t n) { void *p = calloc(1, n ? n : 1); if (!p) abort(); return p; }

static ss_u128 u128_of(const uint64_t *pair) { return ((ss_u128)pair[1] << 64) | pair[0]; }

static ss_u128 *copy_pairs(const uint64_t *pairs, int n)
{
    ss_u128 *v = ss_zalloc(sizeof(ss_u128) * (n > 0 ? n : 1));
    for (int i = 0; i < n; i++)
        v[i] = u128_of(pairs + 2 * i);
    return v;
}

uint64_t ss_now_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- construction ------------------------------------------------------------------------ */
ss_objects *ss_objects_alloc(int ntables, int nprofiles, int nregisters, int ncounters, int nmeters, int nvalue_sets)
{
    ss_objects *o = ss_zalloc(sizeof *o);
    o->ntables = ntables; o->nprofiles = nprofiles; o->nregisters = nregisters;
    o->ncounters = ncounters; o->nmeters = nmeters;
    o->tables = ss_zalloc(sizeof(ss_table) * ntables);
    o->profiles = ss_zalloc(sizeof(ss_profile) * nprofiles);
    o->registers = ss_zalloc(sizeof(ss_register) * nregisters);
    o->counters = ss_zalloc(sizeof(ss_counter_array) * ncounters);
    o->meters = ss_zalloc(sizeof(ss_meter_array) * nmeters);
    o->nvalue_sets = nvalue_sets;
    o->value_sets = ss_zalloc(sizeof(ss_value_set) * nvalue_sets);
    o->rng = 0x9E3779B97F4A7C15ull ^ ss_now_mono_us();
    return o;
}

static void map_init(ss_map *m) { memset(m, 0, sizeof *m); }
static void map_free(ss_map *m) { free(m->slot); free(m->hash); memset(m, 0, sizeof *m); }

void ss_table_init(ss_table *t, const ss_table_desc *d)
{
    memset(t, 0, sizeof *t);
    t->d = *d;
    t->default_action = -1;
    map_init(&t->exact);
    if (d->kind == SS_MK_LPM) {
        int w = d->widths[d->lpm_index];
        t->by_plen = ss_zalloc(sizeof(ss_map) * (w + 1));
        t->plens = ss_zalloc(sizeof(int) * (w + 1));
    }
}

void ss_register_init(ss_register *r, uint32_t size, uint32_t width)
{
    r->size = size; r->width = width;
    r->mask = width >= 64 ? ~0ull : ((1ull << width) - 1);
    r->v = ss_zalloc(sizeof(uint64_t) * size);
}

void ss_counters_init(ss_counter_array *c, uint32_t size)
{
    c->size = size;
    c->packets = ss_zalloc(sizeof(uint64_t) * size);
    c->bytes = ss_zalloc(sizeof(uint64_t) * size);
}

static void meter_init(ss_meter *m, int by_bytes)
{
    memset(m, 0, sizeof *m);
    m->by_bytes = by_bytes;
    m->init_us = (int64_t)ss_now_mono_us();
}

void ss_meters_init(ss_meter_array *m, uint32_t size, int by_bytes)
{
    m->size = size; m->by_bytes = by_bytes;
    m->m = ss_zalloc(sizeof(ss_meter) * size);
    for (uint32_t i = 0; i < size; i++)
        meter_init(&m->m[i], by_bytes);
}

static void entry_free(ss_entry *e) { free(e->data); free(e->match); free(e->norm); memset(e, 0, sizeof *e); }

static void table_free(ss_table *t)
{
    for (uint32_t i = 0; i < t->cap; i++)
        if (t->e[i].used) entry_free(&t->e[i]);
    free(t->e); free(t->free_list); free(t->ordered); free(t->default_data);
    map_free(&t->exact);
    if (t->by_plen) {
        for (int i = 0; i <= t->d.widths[t->d.lpm_index]; i++) map_free(&t->by_plen[i]);
        free(t->by_plen); free(t->plens);
    }
}

static void profile_reset(ss_profile *p)
{
    for (uint32_t i = 0; i < p->nmembers; i++) free(p->members[i].data);
    for (uint32_t i = 0; i < p->ngroups; i++) free(p->groups[i].handles);
    free(p->members); free(p->by_handle); free(p->groups);
    memset(p, 0, sizeof *p);
}

void ss_objects_free(ss_objects *o)
{
    if (!o) return;
    for (int i = 0; i < o->ntables; i++) table_free(&o->tables[i]);
    for (int i = 0; i < o->nprofiles; i++) profile_reset(&o->profiles[i]);
    for (int i = 0; i < o->nregisters; i++) free(o->registers[i].v);
    for (int i = 0; i < o->ncounters; i++) { free(o->counters[i].packets); free(o->counters[i].bytes); }
    for (int i = 0; i < o->nmeters; i++) free(o->meters[i].m);
    for (int i = 0; i < o->nvalue_sets; i++) free(o->value_sets[i].values);
    free(o->value_sets);
    free(o->tables); free(o->profiles); free(o->registers); free(o->counters); free(o->meters);
    free(o);
}

/* ---- hash maps of normalised keys ---------------------------------------------------------- */
static uint64_t key_hash(const ss_u128 *k, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        uint64_t lo = (uint64_t)k[i], hi = (uint64_t)(k[i] >> 64);
        h = (h ^ lo) * 0x100000001b3ull; h ^= h >> 29;
        h = (h ^ hi) * 0x100000001b3ull; h ^= h >> 31;
    }
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 32);
}

static int keys_equal(const ss_u128 *a, const ss_u128 *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static int32_t map_find(const ss_map *m, const ss_table *t, const ss_u128 *key, uint64_t h)
{
    if (!m->cap) return -1;
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        int32_t s = m->slot[i];
        if (s == 0) return -1;
        if (s > 0 && m->hash[i] == h && keys_equal(t->e[s - 1].norm, key, t->d.nkeys)) return s - 1;
    }
}

static void map_put_raw(ss_map *m, int32_t handle, uint64_t h)
{
    uint32_t mask = m->cap - 1;
    uint32_t i = (uint32_t)h & mask;
    while (m->slot[i] > 0) i = (i + 1) & mask;
    if (m->slot[i] < 0) m->tomb--;
    m->slot[i] = handle + 1;
    m->hash[i] = h;
    m->used++;
}

static void map_put(ss_map *m, int32_t handle, uint64_t h)
{
    if ((m->used + m->tomb + 1) * 2 > m->cap) {       /* grow (or clean tombstones) at half full */
        ss_map old = *m;
        uint32_t cap = 16;
        while (cap < (m->used + 1) * 4) cap <<= 1;
        m->cap = cap; m->used = 0; m->tomb = 0;
        m->slot = ss_zalloc(sizeof(int32_t) * cap);
        m->hash = ss_zalloc(sizeof(uint64_t) * cap);
        for (uint32_t i = 0; i < old.cap; i++)
            if (old.slot[i] > 0) map_put_raw(m, old.slot[i] - 1, old.hash[i]);
        free(old.slot); free(old.hash);
    }
    map_put_raw(m, handle, h);
}

static void map_remove(ss_map *m, int32_t handle, uint64_t h)
{
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        if (m->slot[i] == 0) return;
        if (m->slot[i] == handle + 1) { m->slot[i] = -1; m->used--; m->tomb++; return; }
    }
}

/* ---- tables -------------------------------------------------------------------------------- */
static ss_u128 shr128(ss_u128 v, int n) { return n >= 128 ? 0 : v >> n; }

static void lpm_norm(const ss_table *t, const ss_u128 *values, int plen, ss_u128 *out)
{
    int li = t->d.lpm_index;
    for (int i = 0; i < t->d.nkeys; i++) out[i] = values[i];
    out[li] = shr128(values[li], t->d.widths[li] - plen);
}

static int matches(const ss_table *t, const ss_entry *e, const ss_u128 *v)
{
    for (int i = 0; i < t->d.nkeys; i++) {
        ss_u128 a = e->match[2 * i], b = e->match[2 * i + 1];
        switch (t->d.kinds[i]) {
        case SS_MK_TERNARY: case SS_MK_OPTIONAL:
            if ((v[i] & b) != a) return 0;
            break;
        case SS_MK_RANGE:
            if (v[i] < a || v[i] > b) return 0;
            break;
        case SS_MK_LPM: {
            int shift = t->d.widths[i] - (int)b;
            if (shr128(v[i], shift) != shr128(a, shift)) return 0;
            break;
        }
        default:
            if (v[i] != a) return 0;
        }
    }
    return 1;
}

ss_entry *ss_table_lookup(ss_table *t, const ss_u128 *key)
{
    if (t->d.kind == SS_MK_EXACT) {
        int32_t h = map_find(&t->exact, t, key, key_hash(key, t->d.nkeys));
        return h < 0 ? NULL : &t->e[h];
    }
    if (t->d.kind == SS_MK_LPM) {
        ss_u128 k[t->d.nkeys > 0 ? t->d.nkeys : 1];
        for (int i = 0; i < t->nplens; i++) {
            lpm_norm(t, key, t->plens[i], k);
            int32_t h = map_find(&t->by_plen[t->plens[i]], t, k, key_hash(k, t->d.nkeys));
            if (h >= 0) return &t->e[h];
        }
        return NULL;
    }
    for (uint32_t i = 0; i < t->nordered; i++) {
        ss_entry *e = &t->e[t->ordered[i]];
        if (matches(t, e, key)) return e;
    }
    return NULL;
}

static int32_t new_handle(ss_table *t)
{
    if (t->nfree) return t->free_list[--t->nfree];
    if (t->count >= t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 16;
        ss_entry *e = ss_zalloc(sizeof(ss_entry) * cap);
        if (t->cap) memcpy(e, t->e, sizeof(ss_entry) * t->cap);
        free(t->e);
        t->free_list = realloc(t->free_list, sizeof(int32_t) * cap);
        if (!t->free_list) abort();
        t->e = e;
        t->cap = cap;
    }
    return (int32_t)t->count;       /* handles below count are used or in the free list */
}

static ss_table *table_at(ss_objects *o, int table) { return table >= 0 && table < o->ntables ? &o->tables[table] : NULL; }
static ss_entry *entry_at(ss_table *t, int handle)
{
    return t && handle >= 0 && (uint32_t)handle < t->cap && t->e[handle].used ? &t->e[handle] : NULL;
}

static void set_plens(ss_table *t)
{
    int w = t->d.widths[t->d.lpm_index];
    t->nplens = 0;
    for (int p = w; p >= 0; p--)
        if (t->by_plen[p].used) t->plens[t->nplens++] = p;
}

int ss_table_add(ss_objects *o, int table, const uint64_t *match, int32_t priority, int action,
                 const uint64_t *data, int ndata, int64_t member, int64_t group)
{
    ss_table *t = table_at(o, table);
    if (!t) return -1;
    int32_t h = new_handle(t);
    if (h == (int32_t)t->count) t->count++;
    ss_entry *e = &t->e[h];
    memset(e, 0, sizeof *e);
    e->used = 1; e->action = action; e->priority = priority; e->member = member; e->group = group;
    e->seq = t->seq++;
    e->ndata = ndata; e->data = copy_pairs(data, ndata);
    e->match = copy_pairs(match, 2 * t->d.nkeys);
    meter_init(&e->meter, t->d.meter_by_bytes);
    int n = t->d.nkeys;
    if (t->d.kind == SS_MK_EXACT || t->d.kind == SS_MK_LPM) {
        e->norm = ss_zalloc(sizeof(ss_u128) * (n ? n : 1));
        for (int i = 0; i < n; i++) e->norm[i] = e->match[2 * i];
        if (t->d.kind == SS_MK_EXACT) {
            map_put(&t->exact, h, key_hash(e->norm, n));
        } else {
            int plen = (int)e->match[2 * t->d.lpm_index + 1];
            lpm_norm(t, e->norm, plen, e->norm);
            map_put(&t->by_plen[plen], h, key_hash(e->norm, n));
            set_plens(t);
        }
    } else {            /* after every entry of a priority at least as high: stable */
        t->ordered = realloc(t->ordered, sizeof(int32_t) * (t->nordered + 1));
        if (!t->ordered) abort();
        uint32_t at = 0;
        while (at < t->nordered && t->e[t->ordered[at]].priority >= priority) at++;
        memmove(&t->ordered[at + 1], &t->ordered[at], sizeof(int32_t) * (t->nordered - at));
        t->ordered[at] = h;
        t->nordered++;
    }
    return h;
}

int ss_table_modify(ss_objects *o, int table, int handle, int action, const uint64_t *data, int ndata,
                    int64_t member, int64_t group)
{
    ss_entry *e = entry_at(table_at(o, table), handle);
    if (!e) return -1;
    ss_u128 *old = e->data;
    e->data = copy_pairs(data, ndata);
    e->ndata = ndata; e->action = action; e->member = member; e->group = group;
    free(old);
    return 0;
}

int ss_table_delete(ss_objects *o, int table, int handle)
{
    ss_table *t = table_at(o, table);
    ss_entry *e = entry_at(t, handle);
    if (!e) return -1;
    int n = t->d.nkeys;
    if (t->d.kind == SS_MK_EXACT) {
        map_remove(&t->exact, handle, key_hash(e->norm, n));
    } else if (t->d.kind == SS_MK_LPM) {
        int plen = (int)e->match[2 * t->d.lpm_index + 1];
        map_remove(&t->by_plen[plen], handle, key_hash(e->norm, n));
        set_plens(t);
    } else {
        for (uint32_t i = 0; i < t->nordered; i++)
            if (t->ordered[i] == handle) {
                memmove(&t->ordered[i], &t->ordered[i + 1], sizeof(int32_t) * (t->nordered - i - 1));
                t->nordered--;
                break;
            }
    }
    entry_free(e);
    t->free_list[t->nfree++] = handle;
    return 0;
}

int ss_table_clear(ss_objects *o, int table)
{
    ss_table *t = table_at(o, table);
    if (!t) return -1;
    for (uint32_t h = 0; h < t->cap; h++)
        if (t->e[h].used) ss_table_delete(o, table, (int)h);
    return 0;
}

int ss_table_set_default(ss_objects *o, int table, int action, const uint64_t *data, int ndata)
{
    ss_table *t = table_at(o, table);
    if (!t) return -1;
    ss_u128 *old = t->default_data;
    t->default_data = copy_pairs(data, ndata);
    t->ndefault = ndata;
    t->default_action = action;
    free(old);
    return 0;
}

int ss_table_entry_counters(ss_objects *o, int table, int handle, uint64_t *packets, uint64_t *bytes, int write)
{
    ss_entry *e = entry_at(table_at(o, table), handle);
    if (!e) return -1;
    if (write) { e->packets = *packets; e->bytes = *bytes; }
    else { *packets = e->packets; *bytes = e->bytes; }
    return 0;
}

static void meter_set(ss_meter *m, double cir, int64_t cburst, double pir, int64_t pburst)
{
    m->configured = 1;       /* as stateful.Meter.configure: peak first, committed second, buckets full */
    m->rate[0] = pir / 1e6; m->burst[0] = pburst; m->color[0] = 2; m->tokens[0] = pburst; m->last[0] = 0;
    m->rate[1] = cir / 1e6; m->burst[1] = cburst; m->color[1] = 1; m->tokens[1] = cburst; m->last[1] = 0;
}

int ss_table_entry_meter(ss_objects *o, int table, int handle, int set, double cir, int64_t cburst,
                         double pir, int64_t pburst)
{
    ss_entry *e = entry_at(table_at(o, table), handle);
    if (!e) return -1;
    if (set) meter_set(&e->meter, cir, cburst, pir, pburst);
    else e->meter.configured = 0;
    return 0;
}

/* ---- action profiles ----------------------------------------------------------------------- */
static ss_profile *profile_at(ss_objects *o, int p) { return p >= 0 && p < o->nprofiles ? &o->profiles[p] : NULL; }

int ss_profile_reset(ss_objects *o, int profile)
{
    ss_profile *p = profile_at(o, profile);
    if (!p) return -1;
    profile_reset(p);
    return 0;
}

int ss_profile_add_member(ss_objects *o, int profile, int64_t member_id, int action, const uint64_t *data, int ndata)
{
    ss_profile *p = profile_at(o, profile);
    if (!p) return -1;
    if (p->nmembers == p->cap_members) {
        p->cap_members = p->cap_members ? 2 * p->cap_members : 8;
        p->members = realloc(p->members, sizeof(ss_member) * p->cap_members);
        if (!p->members) abort();
    }
    ss_member *m = &p->members[p->nmembers++];
    m->id = member_id; m->action = action; m->ndata = ndata; m->data = copy_pairs(data, ndata);
    return (int)p->nmembers - 1;
}

static int member_index(const ss_profile *p, int64_t id)
{
    for (uint32_t i = 0; i < p->nmembers; i++)
        if (p->members[i].id == id) return (int)i;
    return -1;
}

int ss_profile_set_handle(ss_objects *o, int profile, uint32_t handle, int64_t member_id)
{
    ss_profile *p = profile_at(o, profile);
    if (!p) return -1;
    int m = member_index(p, member_id);
    if (m < 0) return -1;
    if (handle >= p->nhandles) {
        uint32_t n = handle + 1;
        p->by_handle = realloc(p->by_handle, sizeof(int32_t) * n);
        if (!p->by_handle) abort();
        for (uint32_t i = p->nhandles; i < n; i++) p->by_handle[i] = -1;
        p->nhandles = n;
    }
    p->by_handle[handle] = m;
    return 0;
}

int ss_profile_add_group(ss_objects *o, int profile, int64_t group_id, const uint32_t *handles, uint32_t n)
{
    ss_profile *p = profile_at(o, profile);
    if (!p) return -1;
    if (p->ngroups == p->cap_groups) {
        p->cap_groups = p->cap_groups ? 2 * p->cap_groups : 8;
        p->groups = realloc(p->groups, sizeof(ss_group) * p->cap_groups);
        if (!p->groups) abort();
    }
    ss_group *g = &p->groups[p->ngroups++];
    g->id = group_id; g->n = n;
    g->handles = ss_zalloc(sizeof(uint32_t) * (n ? n : 1));
    memcpy(g->handles, handles, sizeof(uint32_t) * n);
    return 0;
}

/* The member an indirect table's entry leads to (codegen._profile_action): its group's
 * handles[hash % n] when the group exists and is not empty, else its member; NULL: none. */
ss_member *ss_profile_member(ss_profile *p, const ss_entry *e, uint32_t hash, int *found)
{
    *found = 0;
    if (e->group >= 0)
        for (uint32_t i = 0; i < p->ngroups; i++)
            if (p->groups[i].id == e->group) {
                ss_group *g = &p->groups[i];
                if (!g->n) break;
                uint32_t h = g->handles[hash % g->n];
                if (h < p->nhandles && p->by_handle[h] >= 0) { *found = 1; return &p->members[p->by_handle[h]]; }
                return NULL;
            }
    if (e->member >= 0) {
        int m = member_index(p, e->member);
        if (m >= 0) { *found = 1; return &p->members[m]; }
    }
    return NULL;
}

/* ---- registers, counters, meters ----------------------------------------------------------- */
int ss_register_access(ss_objects *o, int r, uint32_t index, uint64_t *value, int write)
{
    if (r < 0 || r >= o->nregisters || index >= o->registers[r].size) return -1;
    ss_register *reg = &o->registers[r];
    if (write) reg->v[index] = *value & reg->mask;
    else *value = reg->v[index];
    return 0;
}

int ss_register_reset(ss_objects *o, int r)
{
    if (r < 0 || r >= o->nregisters) return -1;
    memset(o->registers[r].v, 0, sizeof(uint64_t) * o->registers[r].size);
    return 0;
}

int ss_counter_access(ss_objects *o, int c, uint32_t index, uint64_t *packets, uint64_t *bytes, int write)
{
    if (c < 0 || c >= o->ncounters || index >= o->counters[c].size) return -1;
    ss_counter_array *a = &o->counters[c];
    if (write) { a->packets[index] = *packets; a->bytes[index] = *bytes; }
    else { *packets = a->packets[index]; *bytes = a->bytes[index]; }
    return 0;
}

int ss_counter_reset(ss_objects *o, int c)
{
    if (c < 0 || c >= o->ncounters) return -1;
    memset(o->counters[c].packets, 0, sizeof(uint64_t) * o->counters[c].size);
    memset(o->counters[c].bytes, 0, sizeof(uint64_t) * o->counters[c].size);
    return 0;
}

int ss_meter_config(ss_objects *o, int m, uint32_t index, int set, double cir, int64_t cburst,
                    double pir, int64_t pburst)
{
    if (m < 0 || m >= o->nmeters || index >= o->meters[m].size) return -1;
    if (set) meter_set(&o->meters[m].m[index], cir, cburst, pir, pburst);
    else o->meters[m].m[index].configured = 0;
    return 0;
}

/* stateful.Meter.execute: colour of a packet of nbytes (GREEN 0, YELLOW 1, RED 2) */
int ss_meter_execute(ss_meter *m, uint64_t nbytes)
{
    if (!m->configured) return 0;
    int64_t micros = (int64_t)ss_now_mono_us() - m->init_us;
    int64_t amount = m->by_bytes ? (int64_t)nbytes : 1;
    for (int i = 0; i < 2; i++) {
        int64_t since_init = (int64_t)((double)micros * m->rate[i]);
        int64_t fresh = since_init - m->last[i];
        m->last[i] = since_init;
        int64_t tokens = m->tokens[i] + fresh;
        m->tokens[i] = tokens < m->burst[i] ? tokens : m->burst[i];
        if (m->tokens[i] < amount) return m->color[i];
        m->tokens[i] -= amount;
    }
    return 0;
}

void ss_rng_low(ss_objects *o, int on) { o->rng_low = on; }

uint64_t ss_random(ss_objects *o, uint64_t lo, uint64_t hi)
{
    if (o->rng_low || hi <= lo) return lo;
    uint64_t x = o->rng;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    o->rng = x;
    uint64_t span = hi - lo + 1;
    uint64_t r = x * 0x2545F4914F6CDD1Dull;
    return span ? lo + r % span : r;
}

/* ---- calculations -------------------------------------------------------------------------- */
typedef struct crc_cfg { int width; uint64_t poly, init, xout; int reflected; } crc_cfg;

static uint64_t reflect_bits(uint64_t v, int n)
{
    uint64_t r = 0;
    for (int i = 0; i < n; i++) if (v >> i & 1) r |= 1ull << (n - 1 - i);
    return r;
}

/* table[0..255]: the byte table; table[256]: the register's start (the init, reflected for a
 * reflected CRC): both made on first use */
static uint64_t crc_run(const crc_cfg *c, uint64_t *table, int *ready, const uint8_t *buf, uint32_t n)
{
    int w = c->width;
    uint64_t mask = w == 64 ? ~0ull : (1ull << w) - 1;
    if (!*ready) {
        table[256] = c->reflected ? reflect_bits(c->init, w) : c->init;
        for (int i = 0; i < 256; i++) {
            uint64_t r;
            if (c->reflected) {
                uint64_t rpoly = reflect_bits(c->poly, w);
                r = (uint64_t)i;
                for (int k = 0; k < 8; k++) r = (r & 1) ? (r >> 1) ^ rpoly : r >> 1;
            } else {
                uint64_t top = 1ull << (w - 1);
                r = w >= 8 ? (uint64_t)i << (w - 8) : (uint64_t)i;
                for (int k = 0; k < 8; k++) r = (r & top) ? ((r << 1) ^ c->poly) & mask : (r << 1) & mask;
            }
            table[i] = r & mask;
        }
        *ready = 1;
    }
    uint64_t crc = table[256];
    if (c->reflected) {
        for (uint32_t i = 0; i < n; i++) crc = table[(crc ^ buf[i]) & 0xff] ^ (crc >> 8);
    } else {
        for (uint32_t i = 0; i < n; i++) crc = (table[((crc >> (w - 8)) ^ buf[i]) & 0xff] ^ (crc << 8)) & mask;
    }
    return (crc ^ c->xout) & mask;
}

static const crc_cfg CRC16 = {16, 0x8005, 0, 0, 1}, CRC32 = {32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, 1},
                     CCITT = {16, 0x1021, 0xFFFF, 0, 0}, CRC8 = {8, 0x07, 0, 0, 0}, CRC64 = {64, 0x1B, 0, 0, 1};
static uint64_t t16[257], t32[257], tcc[257], t8[257], t64[257];
static int r16, r32, rcc, r8, r64;

static uint64_t csum16(const uint8_t *buf, uint32_t n)
{
    uint64_t sum = 0;
    int nonzero = 0;
    for (uint32_t i = 0; i < n; i += 2) {
        uint32_t word = (uint32_t)buf[i] << 8 | (i + 1 < n ? buf[i + 1] : 0);
        sum += word;
        nonzero |= word != 0;
    }
    if (!nonzero) return 0xFFFF;                   /* hashes.csum16: x == 0 */
    uint64_t s = sum % 0xFFFF;
    return s ? 0xFFFF - s : 0;
}

static uint64_t xor_words(const uint8_t *buf, uint32_t n, int size)
{
    uint64_t x = 0;
    for (uint32_t i = 0; i < n; i += (uint32_t)size) {
        uint64_t w = 0;
        for (int k = 0; k < size; k++) w = w << 8 | (i + k < n ? buf[i + k] : 0);
        x ^= w;
    }
    return x;
}

uint64_t ss_hash(int algo, const uint8_t *buf, uint32_t n)
{
    switch (algo) {
    case SS_ALGO_CRC16: return crc_run(&CRC16, t16, &r16, buf, n);
    case SS_ALGO_CRC32: return crc_run(&CRC32, t32, &r32, buf, n);
    case SS_ALGO_CRC_CCITT: return crc_run(&CCITT, tcc, &rcc, buf, n);
    case SS_ALGO_CRC8_CUSTOM: return crc_run(&CRC8, t8, &r8, buf, n);
    case SS_ALGO_CRC64_CUSTOM: return crc_run(&CRC64, t64, &r64, buf, n);
    case SS_ALGO_CSUM16: return csum16(buf, n);
    case SS_ALGO_IDENTITY: {
        uint64_t x = 0;
        for (uint32_t i = 0; i < n && i < 8; i++) x = x << 8 | buf[i];
        return x;
    }
    case SS_ALGO_XOR16: return xor_words(buf, n, 2);
    case SS_ALGO_XOR32: return xor_words(buf, n, 4);
    case SS_ALGO_HASH_EX: {
        uint32_t h = 2166136261u;
        for (uint32_t i = 0; i < n; i++) h = (h ^ (uint32_t)(int32_t)(int8_t)buf[i]) * 16777619u;
        h += h << 13; h ^= h >> 7; h += h << 3; h ^= h >> 17; h += h << 5;
        return h;
    }
    }
    return 0;
}

/* tests: one calculation algorithm over bytes, to check against hashes.py */
uint64_t ss_hash_bytes(int algo, const uint8_t *buf, uint32_t n) { return ss_hash(algo, buf, n); }

/* tests: the handle of the entry a lookup of key (two words per field) finds, -1 for a miss */
int ss_table_find(ss_objects *o, int table, const uint64_t *key)
{
    ss_table *t = table_at(o, table);
    if (!t) return -2;
    ss_u128 k[t->d.nkeys > 0 ? t->d.nkeys : 1];
    for (int i = 0; i < t->d.nkeys; i++) k[i] = u128_of(key + 2 * i);
    ss_entry *e = ss_table_lookup(t, k);
    return e ? (int)(e - t->e) : -1;
}

/* tests: the action id and data (two words a value, at most cap values) of entry handle, or of
 * the default action for handle -1; returns how many data values, -1 for no such entry */
int ss_table_entry_action(ss_objects *o, int table, int handle, int *action, uint64_t *data, int cap)
{
    ss_table *t = table_at(o, table);
    if (!t) return -1;
    const ss_u128 *d;
    int n;
    if (handle == -1) { *action = t->default_action; d = t->default_data; n = t->ndefault; }
    else {
        ss_entry *e = entry_at(t, handle);
        if (!e) return -1;
        *action = e->action; d = e->data; n = e->ndata;
    }
    for (int i = 0; i < n && i < cap; i++) { data[2 * i] = (uint64_t)d[i]; data[2 * i + 1] = (uint64_t)(d[i] >> 64); }
    return n;
}

/* tests: the member an entry with this group and member would run for a selector hash: its
 * action id (-1: none), and its member id in *member_id */
int ss_profile_pick(ss_objects *o, int profile, int64_t group, int64_t member, uint32_t hash, int64_t *member_id)
{
    ss_profile *p = profile_at(o, profile);
    if (!p) return -2;
    ss_entry e;
    memset(&e, 0, sizeof e);
    e.group = group; e.member = member;
    int found;
    ss_member *m = ss_profile_member(p, &e, hash, &found);
    *member_id = m ? m->id : -1;
    return m ? m->action : -1;
}

/* ---- parser value sets --------------------------------------------------------------------- */
int ss_value_set_set(ss_objects *o, int vs, const uint64_t *values, uint32_t n)
{
    if (vs < 0 || vs >= o->nvalue_sets) return -1;
    ss_u128 *v = copy_pairs(values, (int)n), *old = o->value_sets[vs].values;
    o->value_sets[vs].values = v;
    o->value_sets[vs].n = n;
    free(old);
    return 0;
}

/* ParseValueSet.contains: the key is a member (masked: a member equal to it under the mask) */
int ss_value_set_contains(const ss_value_set *vs, ss_u128 key, ss_u128 mask, int masked)
{
    if (masked) key &= mask;
    for (uint32_t i = 0; i < vs->n; i++)
        if ((masked ? vs->values[i] & mask : vs->values[i]) == key) return 1;
    return 0;
}
