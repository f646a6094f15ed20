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
"""
