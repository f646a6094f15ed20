/* The native transport's message table: messages reassembled by (source, tag) from their
 * fragments, in chains of a hash table, until the caller takes them whole. */
#define _GNU_SOURCE
#include "engine.h"

#include <stdlib.h>
#include <string.h>

static uint32_t bucket(int32_t src, uint64_t tag)
{
    return (uint32_t)(((tag * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)src * 0xC2B2AE3D27D4EB4Full)) >> 52) & (BUCKETS - 1);
}

void msg_free(struct msg *m)
{
    free(m->pub.data);
    free(m->have);
    free(m);
}

/* room for fragment `frag` (the buffer and its bits grown as needed): 0, or -1 out of memory */
static int msg_grow(struct msg *m, uint32_t frag)
{
    if (frag < m->room)
        return 0;
    uint64_t want = (uint64_t)m->room * 2;
    if (want < (uint64_t)frag + 1)
        want = (uint64_t)frag + 1;
    if (want > m->count)
        want = m->count;
    uint8_t *data = realloc(m->pub.data, want * HP_PAYLOAD);
    if (!data)
        return -1;
    m->pub.data = data;
    uint64_t words = (want + 63) / 64, had = ((uint64_t)m->room + 63) / 64;
    uint64_t *have = realloc(m->have, words * 8);
    if (!have)
        return -1;
    memset(have + had, 0, (words - had) * 8);
    m->have = have;
    m->room = (uint32_t)want;
    return 0;
}

/* the partial message (src, tag), made at its first fragment; NULL: another fragment count was
 * given for it before (malformed), or no memory */
struct msg *msg_for(struct msg **table, int32_t src, uint64_t tag, uint32_t frag, uint32_t count)
{
    struct msg **chain = &table[bucket(src, tag)], *m;
    for (m = *chain; m; m = m->next)
        if (!m->complete && m->src == src && m->tag == tag)
            break;
    if (m && m->count != count)
        return NULL;
    if (!m) {
        m = calloc(1, sizeof *m);
        if (!m)
            return NULL;
        m->src = src;
        m->tag = tag;
        m->count = count;
        if (msg_grow(m, count <= HP_EAGER_FRAGMENTS ? count - 1 : frag) < 0) {
            msg_free(m);
            return NULL;
        }
        m->next = *chain;
        *chain = m;
    }
    return msg_grow(m, frag) < 0 ? NULL : m;
}

/* store a fragment; 1 when it completed the message */
int msg_put(struct msg *m, uint32_t frag, const uint8_t *body, size_t len)
{
    if ((m->have[frag >> 6] >> (frag & 63)) & 1)
        return 0;               /* the same fragment under another seq: kept once */
    m->have[frag >> 6] |= 1ull << (frag & 63);
    memcpy(m->pub.data + (uint64_t)frag * HP_PAYLOAD, body, len);
    if (frag == m->count - 1)
        m->last_len = (uint32_t)len;
    if (++m->got < m->count)
        return 0;
    m->complete = 1;
    m->pub.len = (uint64_t)(m->count - 1) * HP_PAYLOAD + m->last_len;
    return 1;
}

/* the whole message (src, tag), out of the table, or NULL */
struct msg *msg_take(struct msg **table, int32_t src, uint64_t tag)
{
    for (struct msg **at = &table[bucket(src, tag)]; *at; at = &(*at)->next) {
        struct msg *m = *at;
        if (m->complete && m->src == src && m->tag == tag) {
            *at = m->next;
            return m;
        }
    }
    return NULL;
}
