// mux_header: a header assigned from a conditional expression (p4c emits cond ? h1 : h2
// for a branch that assigns a whole header in a function). Frame: Ethernet, then headers
// a, b, res (one byte each); res.v = b.v when a.v <= 3, else 0xEE; out of port 1.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header byte_t { bit<8> v; }
struct headers_t { ethernet_t ethernet; byte_t a; byte_t b; byte_t res; }
struct metadata_t { }

parser MuxParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.a);
        packet.extract(hdr.b);
        packet.extract(hdr.res);
        transition accept;
    }
}

control MuxVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

// t[0] becomes x[1] when x[0].v <= 3: p4c turns the branch into a conditional header
// assignment (t[0] = cond ? x[1] : t[0]) in the BMv2 JSON
bit<8> pick(in byte_t[2] x) {
    byte_t[2] t;
    t[0].setValid();
    t[0].v = 0xEE;
    if (x[0].v <= 3) {
        t[0] = x[1];
    }
    return t[0].v;
}

control MuxIngress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    action choose() {
        byte_t[2] x;
        x[0] = hdr.a;
        x[1] = hdr.b;
        hdr.res.v = pick(x);
    }
    apply {
        choose();
        standard_metadata.egress_spec = 1;
    }
}

control MuxEgress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) { apply { } }

control MuxComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MuxDeparser(packet_out packet, in headers_t hdr) {
    apply { packet.emit(hdr.ethernet); packet.emit(hdr.a); packet.emit(hdr.b); packet.emit(hdr.res); }
}

V1Switch(MuxParser(), MuxVerifyChecksum(), MuxIngress(), MuxEgress(), MuxComputeChecksum(), MuxDeparser()) main;
