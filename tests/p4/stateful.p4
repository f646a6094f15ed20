// stateful: register read/modify/write, an indexed counter, an indexed
// meter and random(), all driven by header `st` (ethertype 0x88B5).
//
//   index = st.idx & 15
//   reg[index]: st.reg_old = old value; reg[index] = old + st.add; st.reg_new = new value
//   ctr.count(index)              counter(16, packets_and_bytes), read via P4Runtime
//   mtr.execute_meter(index, st.color)   meter(16, packets): 0 green, 1 yellow, 2 red
//   random(st.rnd_a, 100, 200); random(st.rnd_b, 0, 255)  (range checks only)
//
// Forwarding: fwd (exact ingress_port -> set_port(port)); default drop.
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_ST = 0x88B5;
#define STATE_SIZE 16

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header st_t {
    bit<8>  idx;
    bit<32> add;
    // outputs
    bit<32> reg_old;
    bit<32> reg_new;
    bit<8>  color;
    bit<32> rnd_a;
    bit<8>  rnd_b;
}

struct headers_t {
    ethernet_t ethernet;
    st_t       st;
}

struct metadata_t { }

parser StParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_ST: parse_st;
            default: accept;
        }
    }
    state parse_st {
        packet.extract(hdr.st);
        transition accept;
    }
}

control StVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control StIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    // reg: running sum per index of st.add (P4Runtime RegisterEntry to read).
    register<bit<32>>(STATE_SIZE) reg;
    // ctr: packets and bytes per index.
    counter(STATE_SIZE, CounterType.packets_and_bytes) ctr;
    // mtr: packet-rate meter per index (P4Runtime MeterEntry to configure).
    meter(STATE_SIZE, MeterType.packets) mtr;

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
        fwd.apply();
        if (hdr.st.isValid()) {
            bit<32> index = (bit<32>)(hdr.st.idx & 0x0F);
            bit<32> value;
            reg.read(value, index);
            hdr.st.reg_old = value;
            value = value + hdr.st.add;
            reg.write(index, value);
            hdr.st.reg_new = value;

            ctr.count(index);
            mtr.execute_meter(index, hdr.st.color);

            random(hdr.st.rnd_a, 32w100, 32w200);
            random(hdr.st.rnd_b, 8w0, 8w255);
        }
    }
}

control StEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control StComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control StDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.st);
    }
}

V1Switch(StParser(), StVerifyChecksum(), StIngress(), StEgress(),
         StComputeChecksum(), StDeparser()) main;
