"""softswitch's P4Runtime server (API 1.4.1), modelled on PI's frontend that simple_switch_grpc uses.

    server.py         gRPC service: binding, thread bounds, the handlers and their request bounds, streams
    intake.py         requests bounded before they are parsed; a Write's updates parsed one at a time,
                      a Read's repeated entities merged
    device.py         one device: pipeline push (verify/save/commit/reconcile), write/read dispatch,
                      packet-in/out, locking
    reads.py          Reads: copies under the lock, entities built outside it, deadline and cancel checks
    status.py         statuses and batch error details, bounded for clients with gRPC's default limits
    arbitration.py    primary/backup election per (device, role), stream outboxes, arbitrated-stream places
    streams.py        StreamChannel admission: streams waiting to arbitrate, arbitration timeout
    pipeline.py       one pushed config: Program + id map + P4Runtime-only state (PRE records, ...)
    p4info_map.py     P4Info ids -> BMv2 JSON objects, checked at push (the VERIFY step)
    table_entries.py  TableEntry, DirectCounterEntry, DirectMeterEntry
    entities.py       action profile members/groups, counters, meters, registers, value sets, digests
    pre_entries.py    multicast groups and clone sessions
    packetio.py       controller headers: PacketOut -> frame, frame -> PacketIn
    codec.py          bytestrings <-> ints, bit packing
    wire.py           the protobuf wire format read and written without parsing
    errors.py         P4RTError, google.rpc codes, bounded rendering of values in messages

Limits, so that no client can stall or lock out the primary controller (the numbers are named
constants of the modules in brackets, which say why each is enough):

- requests: gRPC refuses any over 16 MiB; a Write is at most 4 MiB and 100,000 updates, a Read
  256 KiB and 10,000 distinct entities, a P4Info 1 MiB, a stream message 128 KiB (intake.py);
- a Read holds the config lock only to copy what it reads, stops at its client's deadline or
  disconnection, reads an entity repeated in one request once, and at most 4 Reads run at once
  (reads.py, server.py);
- a message shows at most 16 bytes of a value and 512 characters in all; a failed batch's trailer
  keeps the per-update details that fit in 4 KiB, in order, and counts the failures of each code
  (errors.py, status.py);
- at most 8 streams that arbitrated (a newcomer that would become primary takes the place of the
  oldest non-primary) and 4 that have not yet (a new one takes the place of the oldest), which
  have 10 s to arbitrate (arbitration.py, streams.py).

What a stream's end frees, and what a pipeline push blocks:

- a stream whose client is gone (it cancelled the call, closed its channel or connection, or
  let its deadline pass) gives up its place at once: gRPC's end-of-call callback frees it, not
  the stream's own thread, and an arbitration update that was read just before the end is
  refused, never joins (server.py, arbitration.py). 300 streams opened five at a time and
  cancelled, disconnected or timed out used to leave places taken for good (3 of 8 in
  benchmarks/p4runtime_hostile.py); now 7 new controllers all get in after them. A client
  whose host vanished without closing its connection is found out by pings, unanswered for
  10 s after 20 s of silence (server.py; with gRPC's defaults, 60 s if a ping of its own was
  in flight, else 2 hours).
- a pipeline push never holds the config lock for work that grows with the program or the
  state: the new pipeline is built and verified (its program generated) before the lock is
  taken; RECONCILE_AND_COMMIT copies the state under the lock as a Read does, fills the new
  pipeline outside it while Writes go on (journalled), and takes the lock again only to replay
  the journal and swap the pipeline in, under the data plane's lock too, so packets see the
  old pipeline or the new one, and any batch whole (with 4,096 entries carried over every
  1.5 s, 6 writers' Writes waited up to 5.0 s, p99 2.1 s, when the replay held the lock; now
  at most 0.3 s, p99 0.17 s: benchmarks/p4runtime_hostile.py). Pushes wait for one another.
  What a push still costs Writes is CPU: generating a large program's code holds Python's
  interpreter lock in slices, and its garbage is collected in pauses (fabric.p4 pushed every
  1.5 s, as before this change: Write p99 0.04 to 0.15 s, max 0.4 to 2.0 s over runs on a
  busy 2-core machine).

simple_switch_grpc (PI's server, p4lang/PI proto/server/pi_server.cpp and proto/frontend) for
comparison: at most 16 arbitrated streams per device, no bound of its own on streams that have
not arbitrated; one handler thread reads a stream's messages, joins it on its arbitration
update and removes it when the stream ends, so a closed stream frees its place there too (no
two threads to race); no keepalive of its own (gRPC's defaults). A SetForwardingPipelineConfig takes the device's update access for its
whole length (BMv2 loading the new JSON, a RECONCILE_AND_COMMIT's save and replay): it waits
for every Read and Write under way, and Reads wait for it; a Write batch's access, as the
source has it, waits only for Reads and for Writes on the same objects. Measured on
simple_switch_grpc 1.15.5 (benchmarks/p4runtime_hostile.py): after the same 300 abandoned
streams all 7 new controllers are answered; Writes go on during pushes (p99 5 ms), but Writes
made while a VERIFY_AND_COMMIT runs leave PI's copy of the table out of step with BMv2's (later
Reads of it fail with INTERNAL "Table state out-of-sync with target"), and RECONCILE_AND_COMMIT
of tests/p4/tables.p4 fails ("Error when reconciling config").
"""
