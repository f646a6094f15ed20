/* Helpers of the generated pipeline C that use its packet state (ss_st, WIDE_OF: included by
 * the generated file after it defines them). A failure sets S->err (a status of abi.h): the
 * packet is dropped and counted by the status's name, as the Python path's exception is. */
#ifndef SOFTSWITCH_NATIVE_PIPELINE_HELPERS_H
#define SOFTSWITCH_NATIVE_PIPELINE_HELPERS_H

static inline ss_u128 ss_udiv(ss_st *S, ss_u128 a, ss_u128 b) { if (!b) { S->err = SS_ERR_DIV_ZERO; return 0; } return a / b; }
static inline ss_u128 ss_umod(ss_st *S, ss_u128 a, ss_u128 b) { if (!b) { S->err = SS_ERR_DIV_ZERO; return 0; } return a % b; }
/* Python's // and %: floor division */
static inline ss_i128 ss_sdiv(ss_st *S, ss_i128 a, ss_i128 b)
{
    if (!b) { S->err = SS_ERR_DIV_ZERO; return 0; }
    ss_i128 q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline ss_i128 ss_smod(ss_st *S, ss_i128 a, ss_i128 b)
{
    if (!b) { S->err = SS_ERR_DIV_ZERO; return 0; }
    ss_i128 m = a % b;
    return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}

/* bases[i] of a stack; an index outside it fails the packet (the Python path: IndexError;
 * a negative index there counts from the end, as Python's lists do) */
static inline int32_t ss_index(ss_st *S, const int32_t *bases, int n, ss_i128 i)
{
    if (i < 0) i += n;
    if (i < 0 || i >= n) { S->err = SS_ERR_BAD_INDEX; return bases[0]; }
    return bases[(int)i];
}

static inline void ss_copy_slot(ss_st *S, int d, int s)
{
    S->s[d] = S->s[s];
    if (WIDE_OF[d] >= 0) S->w[WIDE_OF[d]] = S->w[WIDE_OF[s]];
}

static inline void ss_copy_slots(ss_st *S, int d, int s, int n) { for (int k = 0; k < n; k++) ss_copy_slot(S, d + k, s + k); }

/* helpers.stack_push / stack_pop */
static inline void ss_stack_push(ss_st *S, const int32_t *elems, int size, int slots, int next, ss_i128 num)
{
    if (num <= 0) return;
    ss_i128 nx = (ss_i128)S->s[next] + num;
    S->s[next] = (uint64_t)(nx < size ? nx : size);
    for (int i = size - 1; i >= num; i--) ss_copy_slots(S, elems[i], elems[i - (int)num], slots);
    for (int i = 0; i < size && i < num; i++) S->s[elems[i]] = 0;
}

static inline void ss_stack_pop(ss_st *S, const int32_t *elems, int size, int slots, int next, ss_i128 num)
{
    if (num <= 0) return;
    S->s[next] -= (uint64_t)((ss_i128)S->s[next] < num ? (ss_i128)S->s[next] : num);
    int keep = num < size ? size - (int)num : 0;
    for (int i = 0; i < keep; i++) ss_copy_slots(S, elems[i], elems[i + (int)num], slots);
    for (int i = keep; i < size; i++) S->s[elems[i]] = 0;
}

#endif
