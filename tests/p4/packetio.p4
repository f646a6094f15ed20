// packetio: P4Runtime packet-in/out through CPU_PORT (255), with the same
// controller headers as fabric.p4. Packets from port 1 are punted to the
// CPU; a packet-out leaves through packet_out.egress_port.
//
// Forwarding (other ports): fwd (exact ingress_port -> set_port(port)); default drop.
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT   = 255;
const bit<9> PUNT_PORT  = 1;

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
}

struct metadata_t { }

parser IoParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control IoVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control IoIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    // fwd: exact ingress_port -> set_port(port); default drop.
    table fwd {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_port; drop; }
        default_action = drop();
    }

    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else if (standard_metadata.ingress_port == PUNT_PORT) {
            standard_metadata.egress_spec = CPU_PORT;
        } else {
            fwd.apply();
        }
    }
}

control IoEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

control IoComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control IoDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
    }
}

V1Switch(IoParser(), IoVerifyChecksum(), IoIngress(), IoEgress(),
         IoComputeChecksum(), IoDeparser()) main;
