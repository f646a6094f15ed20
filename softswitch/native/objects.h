/* softswitch's native run-time objects: match tables, action profiles and selectors, registers,
 * counter and meter arrays, direct counters and meters, and the calculations' algorithms.
 *
 * Generic: nothing here depends on a program. A program's generated C (native/codegen.py)
 * describes its objects (ss_objects_new builds them from static descriptions) and calls the
 * lookups and updates below per packet; Python's control plane writes them through the
 * control functions of abi.h (native/objects.py mirrors every write of the Python objects).
 *
 * Semantics are the Python path's (softswitch/runtime/*.py), which are BMv2's:
 *   exact tables: a hash of the key values; LPM tables: one hash per prefix length, longest
 *   first; ternary, range and optional tables: entries in priority order (higher first, the
 *   earlier inserted first among equals). Entries are addressed by a handle the insert gives.
 */
#ifndef SOFTSWITCH_NATIVE_OBJECTS_H
#define SOFTSWITCH_NATIVE_OBJECTS_H

#include "abi.h"

enum ss_match_kind { SS_MK_EXACT, SS_MK_LPM, SS_MK_TERNARY, SS_MK_RANGE, SS_MK_OPTIONAL, SS_MK_VALID };

typedef struct ss_meter {
    int configured;
    int by_bytes;
    double rate[2];          /* units per microsecond: peak first, committed second */
    int64_t burst[2];
    int color[2];
    int64_t tokens[2];
    int64_t last[2];
    int64_t init_us;
} ss_meter;

typedef struct ss_entry {
    int used;
    int action;              /* action id, -1: none (an indirect table's entry) */
    int32_t priority;
    int64_t member, group;   /* indirect tables: -1 when unset */
    uint64_t seq;            /* insertion order (ties of priority) */
    uint64_t packets, bytes; /* direct counter */
    ss_meter meter;          /* direct meter */
    int ndata;
    ss_u128 *data;
    ss_u128 *match;          /* 2 per key field: exact (v, 0), lpm (v, plen), ternary/optional (v, mask), range (lo, hi) */
    ss_u128 *norm;           /* exact and LPM: the key a lookup compares (LPM: its field shifted to the prefix) */
} ss_entry;

typedef struct ss_map {      /* open addressing: entry handle + 1 by hash of the normalised key; 0 empty, -1 deleted */
    uint32_t cap, used, tomb;
    int32_t *slot;
    uint64_t *hash;
} ss_map;

typedef struct ss_table_desc {
    int nkeys;
    const uint8_t *kinds;    /* enum ss_match_kind per key field */
    const uint16_t *widths;
    int kind;                /* the table's: SS_MK_EXACT, SS_MK_LPM, or ordered (any other) */
    int lpm_index;
    uint32_t max_size;
    int meter_by_bytes;      /* direct meter's unit, when the table has one */
} ss_table_desc;

typedef struct ss_table {
    ss_table_desc d;
    ss_entry *e;
    uint32_t cap, count;
    int32_t *free_list;
    uint32_t nfree;
    uint64_t seq;
    ss_map exact;            /* SS_MK_EXACT */
    ss_map *by_plen;         /* SS_MK_LPM: width + 1 maps */
    int *plens;              /* prefix lengths present, longest first */
    int nplens;
    int32_t *ordered;        /* ordered kinds: handles by priority */
    uint32_t nordered;
    int default_action;      /* -1: none */
    int ndefault;
    ss_u128 *default_data;
} ss_table;

typedef struct ss_member { int64_t id; int action; int ndata; ss_u128 *data; } ss_member;
typedef struct ss_group { int64_t id; uint32_t n; uint32_t *handles; } ss_group;

typedef struct ss_profile {
    uint32_t nmembers, cap_members;
    ss_member *members;
    uint32_t nhandles;       /* by_handle[h] = index into members, -1 none */
    int32_t *by_handle;
    uint32_t ngroups, cap_groups;
    ss_group *groups;
} ss_profile;

typedef struct ss_register { uint32_t size; uint32_t width; uint64_t mask; uint64_t *v; } ss_register;
typedef struct ss_value_set { uint32_t n; ss_u128 *values; } ss_value_set;   /* padded values (program.ParseValueSet) */
typedef struct ss_counter_array { uint32_t size; uint64_t *packets, *bytes; } ss_counter_array;
typedef struct ss_meter_array { uint32_t size; int by_bytes; ss_meter *m; } ss_meter_array;

struct ss_objects {
    int ntables, nprofiles, nregisters, ncounters, nmeters, nvalue_sets;
    ss_table *tables;
    ss_profile *profiles;
    ss_register *registers;
    ss_counter_array *counters;
    ss_meter_array *meters;
    ss_value_set *value_sets;
    uint64_t rng;            /* xorshift64* state */
    int rng_low;             /* tests: random() gives its low bound (the Python path's is patched alike) */
};

/* construction (the generated ss_objects_new) */
ss_objects *ss_objects_alloc(int ntables, int nprofiles, int nregisters, int ncounters, int nmeters, int nvalue_sets);
void ss_table_init(ss_table *t, const ss_table_desc *d);
void ss_register_init(ss_register *r, uint32_t size, uint32_t width);
void ss_counters_init(ss_counter_array *c, uint32_t size);
void ss_meters_init(ss_meter_array *m, uint32_t size, int by_bytes);

/* per packet */
ss_entry *ss_table_lookup(ss_table *t, const ss_u128 *key);
ss_member *ss_profile_member(ss_profile *p, const ss_entry *e, uint32_t hash, int *found);
int ss_meter_execute(ss_meter *m, uint64_t nbytes);
int ss_value_set_contains(const ss_value_set *vs, ss_u128 key, ss_u128 mask, int masked);
uint64_t ss_random(ss_objects *o, uint64_t lo, uint64_t hi);
uint64_t ss_now_mono_us(void);

/* calculations: algorithm ids (native/codegen.py ALGORITHM_IDS) */
enum ss_algo { SS_ALGO_CRC16, SS_ALGO_CRC32, SS_ALGO_CRC_CCITT, SS_ALGO_CSUM16, SS_ALGO_IDENTITY,
               SS_ALGO_XOR16, SS_ALGO_XOR32, SS_ALGO_CRC8_CUSTOM, SS_ALGO_CRC64_CUSTOM, SS_ALGO_HASH_EX,
               SS_ALGO_COUNT };
uint64_t ss_hash(int algo, const uint8_t *buf, uint32_t n);

/* bit packing of a calculation's input, MSB first (hashes.pack_bits): value's low width bits
 * after the nbits already there; whole bytes at once where they fall on a byte boundary */
typedef struct ss_bits { uint8_t buf[2048]; uint32_t nbits; int overflow; } ss_bits;
static inline void ss_bits_put(ss_bits *b, ss_u128 value, uint32_t width)
{
    if (b->nbits + width > 8 * sizeof b->buf) { b->overflow = 1; return; }
    while (width) {
        uint32_t used = b->nbits & 7, at = b->nbits >> 3;
        if (!used && width >= 8) {
            b->buf[at] = (uint8_t)(value >> (width - 8));
            b->nbits += 8; width -= 8;
            continue;
        }
        uint32_t room = 8 - used, take = width < room ? width : room;
        uint8_t bits = (uint8_t)((value >> (width - take)) & ((1u << take) - 1));
        if (!used) b->buf[at] = 0;
        b->buf[at] |= (uint8_t)(bits << (room - take));
        b->nbits += take; width -= take;
    }
}

#endif
