/* softswitch's native data path: what a program's generated pipeline (native/codegen.py emits
 * it, one C file per program) and the native data plane (native/dataplane.c: ports, queues,
 * replication, the loop) give each other. Both are compiled into one shared library per
 * program, so the compiler may inline across them; Python reaches the library only through the
 * control functions at the end (never per packet).
 *
 * Names: ss_ is softswitch native. A program's state layout is the Python path's (layout.py):
 * the same slot numbers, so a differential test can compare the two slot by slot.
 */
#ifndef SOFTSWITCH_NATIVE_ABI_H
#define SOFTSWITCH_NATIVE_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef unsigned __int128 ss_u128;

#define SS_MAX_FRAME 16384             /* bytes a frame may have, in or out */

/* Per-packet registers the data plane reads and writes (simple_switch's standard, intrinsic and
 * queueing metadata, and its hidden packet registers). A program may lack some: ss_has()
 * answers 0 for those and ss_get() answers 0. */
enum ss_meta {
    SS_INGRESS_PORT, SS_EGRESS_SPEC, SS_EGRESS_PORT, SS_INSTANCE_TYPE, SS_PACKET_LENGTH,
    SS_PARSER_ERROR, SS_CHECKSUM_ERROR, SS_MCAST_GRP, SS_EGRESS_RID, SS_PRIORITY,
    SS_INGRESS_GLOBAL_TIMESTAMP, SS_EGRESS_GLOBAL_TIMESTAMP, SS_ENQ_TIMESTAMP, SS_ENQ_QDEPTH,
    SS_DEQ_TIMEDELTA, SS_DEQ_QDEPTH, SS_QID,
    /* hidden registers (layout.HIDDEN_REGISTERS) */
    SS_CLONE_SESSION, SS_CLONE_FIELD_LIST, SS_RESUBMIT_FIELD_LIST, SS_RECIRCULATE_FIELD_LIST,
    SS_HIDDEN_PACKET_LENGTH, SS_TRUNCATE_LENGTH, SS_LEARN_ID, SS_INGRESS_LENGTH,
    SS_META_COUNT
};

/* A run of the pipeline may fail on a packet (BMv2 would log or assert): the packet is dropped
 * and counted by the error's name, never a crash. 0 is success. */
enum ss_status { SS_OK = 0, SS_ERR_ABORT = 1, SS_ERR_BAD_INDEX, SS_ERR_DIV_ZERO, SS_ERR_TOO_LONG,
                 SS_ERR_UNSUPPORTED, SS_STATUS_COUNT };
const char *ss_status_name(int status);

/* The program's run-time objects (tables, action profiles, registers, counters, meters, value
 * sets) for one switch; made by the generated code, owned by the data plane. Opaque here. */
typedef struct ss_objects ss_objects;

/* ---- generated per program (native/codegen.py) ---------------------------------------- */
size_t ss_state_size(void);                      /* bytes of one packet's state */
void ss_state_init(void *st);                    /* the template: what a new packet starts with */
int ss_has(int meta);                            /* enum ss_meta */
uint64_t ss_get(const void *st, int meta);
void ss_set(void *st, int meta, uint64_t value);
uint64_t ss_meta_mask(int meta);                 /* all ones over the field's width */
/* parse frame[0:len]: sets parser_error as BMv2 does; *consumed = bytes the headers took */
int ss_parse(ss_objects *o, void *st, const uint8_t *frame, uint32_t len, uint32_t *consumed);
int ss_verify_checksums(ss_objects *o, void *st, int *ok);
int ss_ingress(ss_objects *o, void *st);
int ss_egress(ss_objects *o, void *st);
int ss_update_checksums(ss_objects *o, void *st);
/* the valid headers, in deparser order, into out[0:cap]; *written = bytes */
int ss_deparse(ss_objects *o, const void *st, uint8_t *out, uint32_t cap, uint32_t *written);
/* resubmit/recirculate/clone: copy a field list's fields from src to dst */
void ss_copy_field_list(int field_list_id, const void *src, void *dst);

ss_objects *ss_objects_new(void);
void ss_objects_free(ss_objects *o);

/* ---- the data plane (native/dataplane.c) ---------------------------------------------- */
typedef struct ss_dataplane ss_dataplane;
/* time in microseconds since the data plane started, as BMv2 reports it */
uint64_t ss_now_us(const ss_dataplane *dp);

#endif
