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

#include "xsk.h"

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
/* a clone's metadata reset (layout.metadata_slots to 0), before its field list is copied in.
 * The state is flat (no pointers): the data plane copies a packet's state with memcpy and keeps
 * the payload (the frame's bytes after the parsed headers) itself. */
void ss_clear_metadata(void *st);

ss_objects *ss_objects_new(void);
void ss_objects_free(ss_objects *o);

/* ---- control functions of the run-time objects (native/objects.c; Python: native/objects.py) --
 * Called only under the data plane's batch lock. Values of up to 128 bits are passed as two
 * uint64_t words, low first. Tables, profiles, registers, counter and meter arrays are numbered
 * as native/codegen.py lists them. Entries are addressed by the handle ss_table_add answers.
 * A negative answer: no such table, entry, index... */
int ss_table_add(ss_objects *o, int table, const uint64_t *match, int32_t priority, int action,
                 const uint64_t *data, int ndata, int64_t member, int64_t group);
int ss_table_modify(ss_objects *o, int table, int handle, int action, const uint64_t *data, int ndata,
                    int64_t member, int64_t group);
int ss_table_delete(ss_objects *o, int table, int handle);
int ss_table_clear(ss_objects *o, int table);
int ss_table_set_default(ss_objects *o, int table, int action, const uint64_t *data, int ndata);
int ss_table_entry_counters(ss_objects *o, int table, int handle, uint64_t *packets, uint64_t *bytes, int write);
int ss_table_entry_meter(ss_objects *o, int table, int handle, int set, double cir, int64_t cburst,
                         double pir, int64_t pburst);
int ss_profile_reset(ss_objects *o, int profile);
int ss_profile_add_member(ss_objects *o, int profile, int64_t member_id, int action, const uint64_t *data, int ndata);
int ss_profile_set_handle(ss_objects *o, int profile, uint32_t handle, int64_t member_id);
int ss_profile_add_group(ss_objects *o, int profile, int64_t group_id, const uint32_t *handles, uint32_t n);
int ss_register_access(ss_objects *o, int reg, uint32_t index, uint64_t *value, int write);
int ss_register_reset(ss_objects *o, int reg);
int ss_counter_access(ss_objects *o, int counter, uint32_t index, uint64_t *packets, uint64_t *bytes, int write);
int ss_counter_reset(ss_objects *o, int counter);
int ss_meter_config(ss_objects *o, int meter, uint32_t index, int set, double cir, int64_t cburst,
                    double pir, int64_t pburst);
int ss_value_set_set(ss_objects *o, int value_set, const uint64_t *values, uint32_t n);  /* replaces its members */
void ss_rng_low(ss_objects *o, int on);     /* tests: random() answers its low bound */
/* inspection (tests): what a lookup finds (handle, -1 a miss), an entry's or the default's (handle
 * -1) action and data, the member a profile picks for an entry's group/member and a hash, a hash */
int ss_table_find(ss_objects *o, int table, const uint64_t *key);
int ss_table_entry_action(ss_objects *o, int table, int handle, int *action, uint64_t *data, int cap);
int ss_profile_pick(ss_objects *o, int profile, int64_t group, int64_t member, uint32_t hash, int64_t *member_id);
uint64_t ss_hash_bytes(int algo, const uint8_t *buf, uint32_t n);

/* frame_run.c: one frame through the pipeline alone (tests, benchmarks/native_pipeline.py) */
int ss_run_frame(ss_objects *o, void *st, const uint8_t *frame, uint32_t len, uint32_t port,
                 int stop_after_ingress, int replica_port, uint32_t replica_rid,
                 uint8_t *out, uint32_t cap, uint32_t *outlen);
uint64_t ss_time_frames(ss_objects *o, void *st, const uint8_t *frame, uint32_t len, uint32_t port, uint32_t n,
                        int replica_port, uint8_t *out, uint32_t cap, int *last);

/* generated per program, for tests and the Python side: a slot's raw bits as two words */
int ss_slot_count(void);
void ss_slot_read(const void *st, int slot, uint64_t *pair);
void ss_slot_write(void *st, int slot, const uint64_t *pair);
int ss_state_error(const void *st);

/* ---- the data plane (native/dataplane.c) ---------------------------------------------- */
typedef struct ss_dataplane ss_dataplane;
/* time in microseconds since the data plane started, as BMv2 reports it */
uint64_t ss_now_us(const ss_dataplane *dp);

/* Control (Python, by ctypes; never per packet). Every function but lock/unlock, counters,
 * packet_in/out and stop is called with the data plane locked (ss_dp_lock): the loop holds the
 * same mutex while it processes a burst, so a write batch is seen whole or not at all. */
#define SS_NO_PORT (-1)
#define SS_MAX_PORTS 512                /* port numbers 0..511 (9-bit egress_spec) */
#define SS_MAX_PRIORITY_QUEUES 8

typedef struct ss_counters {
    uint64_t rx, tx, dropped, queue_drops, errors, packet_in, packet_out;
    uint64_t packet_in_lost;            /* packet-ins the CPU port's ring had no room for */
    uint64_t lossless_drops;            /* packets of a lossless class dropped (headroom or queue too small) */
    uint64_t watchdog_drops;            /* packets the PFC watchdog dropped */
    uint64_t mac_control;               /* MAC control frames that came in: PFC's, never the pipeline's */
    uint64_t by_status[SS_STATUS_COUNT];  /* errors by ss_status (ss_status_name) */
} ss_counters;

typedef struct ss_port_counters { uint64_t rx, tx, tx_errors; } ss_port_counters;

/* the queues' default pace: queue_bitrate bits/s when not 0, else queue_rate_pps packets/s */
ss_dataplane *ss_dp_new(int cpu_port, int drop_port, int priority_queues,
                        uint32_t queue_depth, uint32_t queue_rate_pps, uint64_t queue_bitrate);
int ss_dp_add_port(ss_dataplane *dp, int number, int fd);     /* 0, or -1 (bad number, twice) */
/* AF_XDP port I/O (native/xsk.c): port's frames through an AF_XDP socket on interface ifindex
 * (queue 0, an XDP program redirecting to it) from now on, its AF_PACKET socket (add_port) still
 * read for what XDP passes on; before the loop starts. 0, or an errno and why[0:cap]. The socket
 * and the program go with ss_dp_close_xsks or ss_dp_free. */
int ss_dp_open_xsk(ss_dataplane *dp, int port, int ifindex, char *why, uint32_t cap);
void ss_dp_close_xsks(ss_dataplane *dp);      /* every AF_XDP socket closed, its program detached (loop stopped) */
/* how a port's frames go: 0 its AF_PACKET socket, 1 its AF_XDP socket (*out filled), 2 its
 * AF_XDP socket was closed when its interface was removed; -1 not a port number (locked: the
 * loop closes such a socket) */
int ss_dp_port_io(const ss_dataplane *dp, int port, ss_xsk_info *out);
ss_objects *ss_dp_objects(ss_dataplane *dp);
int ss_dp_start(ss_dataplane *dp);                            /* the loop's thread: 0 or errno */
void ss_dp_stop(ss_dataplane *dp);                            /* joins the loop's thread */
void ss_dp_free(ss_dataplane *dp);                            /* stopped first; fds not closed */
void ss_dp_lock(ss_dataplane *dp);
void ss_dp_unlock(ss_dataplane *dp);
/* traffic classes (softswitch/queues.py, classes.py): a class's settings as the Python side's
 * QueueSettings.class_settings gives them (bitrate: the class's own shaper; weight 0: strict
 * priority, else packets a turn of the weighted round robin), and a port's link's bit rate; port
 * SS_NO_PORT is every port, priority -1 every class; a queue already made takes them from its
 * last departure */
void ss_dp_set_class(ss_dataplane *dp, int port, int priority, uint32_t depth, uint32_t rate_pps,
                     uint64_t bitrate, uint32_t weight);
void ss_dp_set_link(ss_dataplane *dp, int port, uint64_t bits_per_s);
uint32_t ss_dp_queue_length(ss_dataplane *dp, int port, int priority);
/* a class of a port: its queue's settings, state and counters, and PFC's figures (pfc.py). next_free:
 * when the class may send next (its pace and its link both free); last_departure and the ring
 * recent_*: µs since the start, as the departures the queue gives; detected_after_us < 0: no storm */
typedef struct ss_class_info {
    uint64_t bitrate, link_bitrate, drops, tx_packets, tx_bytes, watchdog_drops;
    double last_departure, next_free, paused_us;
    uint32_t depth, rate_pps, weight, length;
    int32_t made, paused, dropping, pfc;
    int32_t lossless, pausing, storm, recent_n;
    uint32_t xoff, xon, headroom, quanta;
    uint64_t buffer_bytes, buffer_frames, buffer_peak;
    uint64_t pause_sent, xon_sent, lossless_drops, at_xoff_bytes, at_xoff_frames;
    uint64_t pause_received, xon_received, storms, restores;
    double pausing_us, detected_after_us;
    double recent_at[16];
    uint32_t recent_len[16];
} ss_class_info;
int ss_dp_class_info(ss_dataplane *dp, int port, int priority, ss_class_info *out);   /* 0, or -1 */
/* priority flow control (softswitch/pfc.py): a port's own MAC address (the source of its PFC
 * frames); a class lossless on a port (xoff 0: lossy again); the watchdog (detect_us 0: off;
 * drop 1: its action drops, 0: forwards); malformed MAC control frames that came in on a port,
 * by reason (short, destination, opcode, reserved) */
#define SS_PFC_MALFORMED_REASONS 4
void ss_dp_set_port_mac(ss_dataplane *dp, int port, const uint8_t *mac);
void ss_dp_set_lossless(ss_dataplane *dp, int port, int priority, uint32_t xoff, uint32_t xon, uint32_t headroom,
                        uint32_t quanta);
void ss_dp_set_pfc_watchdog(ss_dataplane *dp, uint64_t detect_us, uint64_t restore_us, uint64_t poll_us, int drop);
int ss_dp_pfc_malformed(ss_dataplane *dp, int port, uint64_t *out);
/* replication: a group's or session's copies, (ports[i], rids[i]) in BMv2's order; replaces */
int ss_dp_set_group(ss_dataplane *dp, uint32_t group, uint32_t n, const uint32_t *ports,
                    const uint32_t *rids);
void ss_dp_delete_group(ss_dataplane *dp, uint32_t group);
int ss_dp_set_session(ss_dataplane *dp, uint32_t session, uint32_t n, const uint32_t *ports,
                      const uint32_t *rids, uint32_t truncate_length);
void ss_dp_delete_session(ss_dataplane *dp, uint32_t session);
void ss_dp_clear_replication(ss_dataplane *dp);
/* counters, read without the lock (each one whole, not all at one instant) */
void ss_dp_counters(const ss_dataplane *dp, ss_counters *out);
int ss_dp_port_counters(const ss_dataplane *dp, int port, ss_port_counters *out);
/* CPU port: a packet-out enters ingress on the CPU port (0, or -1: too long / no CPU port);
 * packet-ins wait in a ring: packet_in_fd becomes readable (an eventfd) when some do, and
 * packet_in takes the oldest into buf (its length; 0 none waiting; -1 buf too small) */
int ss_dp_packet_out(ss_dataplane *dp, const uint8_t *frame, uint32_t len);
int ss_dp_packet_in_fd(const ss_dataplane *dp);
int ss_dp_packet_in(ss_dataplane *dp, uint8_t *buf, uint32_t cap);

#endif
