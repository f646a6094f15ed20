"""softswitch's P4Runtime server (API 1.4.1), modelled on PI's frontend that simple_switch_grpc uses.

    server.py         gRPC service: binding, thread bounds, status / error-detail encoding, streams
    device.py         one device: pipeline push (verify/save/commit/reconcile), write/read dispatch,
                      packet-in/out, locking
    arbitration.py    primary/backup election per (device, role), stream outboxes
    pipeline.py       one pushed config: Program + id map + P4Runtime-only state (PRE records, ...)
    p4info_map.py     P4Info ids -> BMv2 JSON objects, checked at push (the VERIFY step)
    table_entries.py  TableEntry, DirectCounterEntry, DirectMeterEntry
    entities.py       action profile members/groups, counters, meters, registers, value sets, digests
    pre_entries.py    multicast groups and clone sessions
    packetio.py       controller headers: PacketOut -> frame, frame -> PacketIn
    codec.py          bytestrings <-> ints, bit packing
    errors.py         P4RTError and google.rpc codes
"""
