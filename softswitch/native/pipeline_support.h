/* Helpers of the generated pipeline C that do not depend on a program's state layout
 * (native/codegen.py): 128-bit arithmetic as the Python path computes it, big-endian loads
 * and stores of header chunks. */
#ifndef SOFTSWITCH_NATIVE_PIPELINE_SUPPORT_H
#define SOFTSWITCH_NATIVE_PIPELINE_SUPPORT_H

#include <string.h>
#include "abi.h"

typedef __int128 ss_i128;

/* shifts by any amount, as Python's ints shift (a shift of 128 bits or more leaves 0, or the sign) */
static inline ss_u128 ss_shl(ss_u128 a, ss_u128 n) { return n >= 128 ? 0 : a << (unsigned)n; }
static inline ss_u128 ss_shr(ss_u128 a, ss_u128 n) { return n >= 128 ? 0 : a >> (unsigned)n; }
static inline ss_i128 ss_sar(ss_i128 a, ss_u128 n) { return n >= 127 ? (a < 0 ? -1 : 0) : a >> (unsigned)n; }

/* BMv2's two_comp_mod: the signed value of v's low w bits */
static inline ss_i128 ss_tcm(ss_i128 v, int w)
{
    if (w >= 128) return v;
    if (w <= 0) return 0;
    ss_u128 m = ((ss_u128)1 << w) - 1, x = (ss_u128)v & m;
    return (x >> (w - 1)) & 1 ? (ss_i128)(x | ~m) : (ss_i128)x;
}

static inline ss_u128 ss_usat(ss_i128 v, int w)
{
    ss_i128 top = w >= 127 ? (ss_i128)(((ss_u128)1 << 127) - 1) : (((ss_i128)1 << w) - 1);
    return v > top ? (ss_u128)top : v < 0 ? 0 : (ss_u128)v;
}

static inline ss_i128 ss_sat(ss_i128 v, int w)
{
    ss_i128 top = w >= 128 ? (ss_i128)(((ss_u128)1 << 127) - 1) : (((ss_i128)1 << (w - 1)) - 1);
    ss_i128 low = -top - 1;
    return v > top ? top : v < low ? low : v;
}

/* n (1..8) bytes big-endian */
static inline __attribute__((always_inline)) uint64_t ss_load_be64(const uint8_t *p, int n)
{
    uint64_t x = 0;
    for (int i = 0; i < n; i++) x = x << 8 | p[i];
    return x;
}

/* n (1..16) bytes big-endian */
static inline __attribute__((always_inline)) ss_u128 ss_load_be(const uint8_t *p, int n)
{
    if (n <= 8) {
        uint64_t x = 0;
        for (int i = 0; i < n; i++) x = x << 8 | p[i];
        return x;
    }
    ss_u128 x = 0;
    for (int i = 0; i < n; i++) x = x << 8 | p[i];
    return x;
}

static inline __attribute__((always_inline)) void ss_store_be(uint8_t *p, int n, ss_u128 v)
{
    if (n <= 8) {
        uint64_t x = (uint64_t)v;
        for (int i = n - 1; i >= 0; i--) { p[i] = (uint8_t)x; x >>= 8; }
        return;
    }
    for (int i = n - 1; i >= 0; i--) { p[i] = (uint8_t)v; v >>= 8; }
}

/* width bits at bit offset bit_off of pkt[off:], bytes past the end read as zero (a transition
 * key's lookahead: BMv2 reads past a short packet) */
static inline ss_u128 ss_peek(const uint8_t *pkt, uint32_t len, uint32_t off, int bit_off, int width)
{
    int nbytes = (bit_off + width + 7) / 8;
    ss_u128 x = 0;
    for (int i = 0; i < nbytes; i++) x = x << 8 | (off + i < len ? pkt[off + i] : 0);
    x >>= nbytes * 8 - bit_off - width;
    return width >= 128 ? x : x & (((ss_u128)1 << width) - 1);
}

/* width (<= 128) bits at bit pos of p, MSB first; and the same written (bits already 0 or not) */
static inline ss_u128 ss_get_bits(const uint8_t *p, uint32_t pos, uint32_t width)
{
    ss_u128 v = 0;
    for (uint32_t i = 0; i < width; i++) {
        uint32_t b = pos + i;
        v = (v << 1) | ((p[b >> 3] >> (7 - (b & 7))) & 1);
    }
    return v;
}

static inline void ss_put_bits(uint8_t *p, uint32_t pos, ss_u128 v, uint32_t width)
{
    for (uint32_t i = 0; i < width; i++) {
        uint32_t b = pos + i;
        uint8_t bit = (uint8_t)(0x80 >> (b & 7));
        if ((v >> (width - 1 - i)) & 1) p[b >> 3] |= bit;
        else p[b >> 3] &= (uint8_t)~bit;
    }
}

#endif
