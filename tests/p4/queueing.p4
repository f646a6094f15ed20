// queueing: forward by ingress port and report the queueing metadata of the
// egress in header `q`, inserted after ethernet (the original ethertype moves
// into q.ether_type; ethernet.ether_type becomes 0x88B5).
//
// Forwarding: fwd (exact ingress_port -> set_port(port), or
// set_port_priority(port, priority): the egress priority queue too); default drop.
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_Q = 0x88B5;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header q_t {
    bit<32> enq_qdepth;                 // packets (19 bits in v1model)
    bit<32> deq_qdepth;
    bit<32> enq_timestamp;              // microseconds
    bit<32> deq_timedelta;
    bit<48> ingress_global_timestamp;
    bit<48> egress_global_timestamp;
    bit<8>  qid;
    bit<16> ether_type;                 // of the original frame
}

// BMv2's queue id (queueing_metadata.qid, the priority queue the packet left
// from; 0 without priority queues) is not in v1model's standard_metadata_t.
// p4c emits @alias only for fields of a header or metadata *type* whose name
// is also the instance name (it flattens user metadata structs, dropping the
// alias), hence this header: never valid, never emitted, only read.
@name("qmeta")
header qmeta_t {
    @alias("queueing_metadata.qid")
    bit<5> qid;
    bit<3> _pad;
}

struct headers_t {
    ethernet_t ethernet;
    q_t        q;
    qmeta_t    qmeta;
}

struct metadata_t { }

parser QParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control QVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control QIngress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action set_port_priority(bit<9> port, bit<3> priority) {
        standard_metadata.egress_spec = port;
        standard_metadata.priority = priority;
    }

    // fwd: exact ingress_port -> set_port(port) or set_port_priority(port, priority); default drop.
    table fwd {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_port; set_port_priority; drop; }
        default_action = drop();
    }

    apply {
        fwd.apply();
    }
}

control QEgress(inout headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply {
        hdr.q.setValid();
        hdr.q.enq_qdepth    = (bit<32>)standard_metadata.enq_qdepth;
        hdr.q.deq_qdepth    = (bit<32>)standard_metadata.deq_qdepth;
        hdr.q.enq_timestamp = standard_metadata.enq_timestamp;
        hdr.q.deq_timedelta = standard_metadata.deq_timedelta;
        hdr.q.ingress_global_timestamp = standard_metadata.ingress_global_timestamp;
        hdr.q.egress_global_timestamp  = standard_metadata.egress_global_timestamp;
        hdr.q.qid = (bit<8>)hdr.qmeta.qid;
        hdr.q.ether_type = hdr.ethernet.ether_type;
        hdr.ethernet.ether_type = ETHERTYPE_Q;
    }
}

control QComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control QDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.q);
    }
}

V1Switch(QParser(), QVerifyChecksum(), QIngress(), QEgress(),
         QComputeChecksum(), QDeparser()) main;
