// replication: multicast, I2E and E2E clones preserving a field list,
// resubmit and recirculate preserving counters, truncate, drop in egress.
// Header `rep` (ethertype 0x88B5) says what to do (flags) and egress writes
// what it sees into its output fields.
//
// Ingress, packets with `rep` (fwd is applied to every packet):
//   FLAG_RESUBMIT  resubmit while meta.resubmit_count < 2 (count preserved)
//   FLAG_CLONE_I2E clone to session I2E_SESSION (5) preserving clone_tag = 0xC1
//                  and orig_ig_port (field list FL_CLONE)
//   FLAG_TRUNCATE  truncate(TRUNCATE_LEN = 48 bytes)
// Ingress also writes ig_instance_type (the instance type ingress saw).
// Egress, packets with `rep`: writes instance_type, egress_rid, egress_port,
// ingress_port, packet_length, the counters and the preserved fields, then
//   FLAG_CLONE_E2E original packets (instance_type 0) are cloned to session
//                  E2E_SESSION (6), preserving clone_tag = 0xE2, orig_ig_port
//   FLAG_RECIRC    recirculate while meta.recirc_count < 2 (count preserved)
//   FLAG_DROP      original packets (instance_type 0) are dropped (mark_to_drop)
//
// Forwarding: fwd (exact ingress_port -> set_port(port) | set_mcast(grp));
// default drop. Multicast groups and clone sessions come from the controller.
// BMv2 preserves only the field list across resubmit, recirculate and clone:
// resubmitted and recirculated packets come back with ingress_port 0 (give
// port 0 a fwd entry), I2E/E2E clones reach egress with ingress_port 0;
// orig_ig_port (set on the first pass, in every field list) keeps the port.
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_REP = 0x88B5;

const bit<8> FLAG_CLONE_I2E = 0x01;
const bit<8> FLAG_CLONE_E2E = 0x02;
const bit<8> FLAG_RESUBMIT  = 0x04;
const bit<8> FLAG_RECIRC    = 0x08;
const bit<8> FLAG_TRUNCATE  = 0x10;
const bit<8> FLAG_DROP      = 0x20;

const bit<32> I2E_SESSION  = 5;
const bit<32> E2E_SESSION  = 6;
const bit<32> TRUNCATE_LEN = 48;
const bit<8>  MAX_PASSES   = 2;

#define FL_RESUBMIT 1
#define FL_RECIRC   2
#define FL_CLONE    3

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header rep_t {
    bit<8>  flags;
    // output (ingress, last pass): 6 after a resubmit, 4 after a recirculation
    bit<32> ig_instance_type;
    // outputs (egress; BMv2 reports instance_type 0 for a resubmitted or
    // recirculated packet that leaves normally)
    bit<32> instance_type;
    bit<16> egress_rid;
    bit<16> egress_port;
    bit<16> ingress_port;
    bit<32> packet_length;
    bit<8>  resubmit_count;
    bit<8>  recirc_count;
    bit<8>  clone_tag;
    bit<16> orig_ig_port;
}

struct headers_t {
    ethernet_t ethernet;
    rep_t      rep;
}

struct metadata_t {
    @field_list(FL_RESUBMIT)
    bit<8>  resubmit_count;
    @field_list(FL_RECIRC)
    bit<8>  recirc_count;
    @field_list(FL_CLONE)
    bit<8>  clone_tag;
    @field_list(FL_RESUBMIT, FL_RECIRC, FL_CLONE)
    bit<16> orig_ig_port;
}

parser RepParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_REP: parse_rep;
            default: accept;
        }
    }
    state parse_rep {
        packet.extract(hdr.rep);
        transition accept;
    }
}

control RepVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control RepIngress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action set_mcast(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
    }

    // fwd: exact ingress_port -> set_port(port) | set_mcast(grp); default drop.
    table fwd {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_port; set_mcast; drop; }
        default_action = drop();
    }

    apply {
        fwd.apply();
        if (hdr.rep.isValid()) {
            hdr.rep.ig_instance_type = standard_metadata.instance_type;
            if (standard_metadata.instance_type == 0) {
                meta.orig_ig_port = (bit<16>)standard_metadata.ingress_port;
            }
            if ((hdr.rep.flags & FLAG_RESUBMIT) != 0 && meta.resubmit_count < MAX_PASSES) {
                meta.resubmit_count = meta.resubmit_count + 1;
                resubmit_preserving_field_list(FL_RESUBMIT);
            }
            if ((hdr.rep.flags & FLAG_CLONE_I2E) != 0) {
                meta.clone_tag = 0xC1;
                clone_preserving_field_list(CloneType.I2E, I2E_SESSION, FL_CLONE);
            }
            if ((hdr.rep.flags & FLAG_TRUNCATE) != 0) {
                truncate(TRUNCATE_LEN);
            }
        }
    }
}

control RepEgress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.rep.isValid()) {
            hdr.rep.instance_type  = standard_metadata.instance_type;
            hdr.rep.egress_rid     = standard_metadata.egress_rid;
            hdr.rep.egress_port    = (bit<16>)standard_metadata.egress_port;
            hdr.rep.ingress_port   = (bit<16>)standard_metadata.ingress_port;
            hdr.rep.packet_length  = standard_metadata.packet_length;
            hdr.rep.resubmit_count = meta.resubmit_count;
            hdr.rep.recirc_count   = meta.recirc_count;
            hdr.rep.clone_tag      = meta.clone_tag;
            hdr.rep.orig_ig_port   = meta.orig_ig_port;

            if ((hdr.rep.flags & FLAG_CLONE_E2E) != 0 && standard_metadata.instance_type == 0) {
                meta.clone_tag = 0xE2;
                clone_preserving_field_list(CloneType.E2E, E2E_SESSION, FL_CLONE);
            }
            if ((hdr.rep.flags & FLAG_RECIRC) != 0 && meta.recirc_count < MAX_PASSES) {
                meta.recirc_count = meta.recirc_count + 1;
                recirculate_preserving_field_list(FL_RECIRC);
            }
            if ((hdr.rep.flags & FLAG_DROP) != 0 && standard_metadata.instance_type == 0) {
                mark_to_drop(standard_metadata);
            }
        }
    }
}

control RepComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control RepDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.rep);
    }
}

V1Switch(RepParser(), RepVerifyChecksum(), RepIngress(), RepEgress(),
         RepComputeChecksum(), RepDeparser()) main;
