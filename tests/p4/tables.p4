// tables: one table per match kind and table feature; each writes its action
// parameter (or a marker) into its own output field of header `tbl`
// (ethertype 0x88B5). A miss leaves the output at 0 unless noted.
//
//   t_exact    exact k16                  -> set_exact(v)   direct counter c_exact
//   t_lpm      lpm k32                    -> set_lpm(v)
//   t_ternary  ternary t1, t2             -> set_ternary(v) direct meter m_ternary -> color
//   t_range    range r16                  -> set_range(v)
//   t_optional optional o8                -> set_optional(v)
//   t_const    exact o8, const entries    -> set_const(v)   (1 -> 0x11, 2 -> 0x22, 3 -> 0x33)
//   t_constdef exact k16, const default   -> set_constdef(v); default set_constdef(0xBEEF)
//   t_defparam exact k32                  -> set_defparam(v); default set_defparam(0x1234), mutable
//   t_prof     exact k16, action profile  -> set_prof(v)
//   t_sel16    exact k16 + selector (k32, t2), crc16 -> set_sel16(v)
//   t_sel32    exact k16 + selector (k32, t2), crc32 -> set_sel32(v)
//   t_switch   exact o8 -> act_a(v) | act_b(v) | nop; switch(action_run):
//              sw_tag = 0xA / 0xB / 0xD (default: nop or miss); sw_value = v
//   t_hit      exact k16 -> set_hit(v) | nop; hit_tag = 1 on hit, 2 on miss
//
// Forwarding: fwd (exact ingress_port -> set_port(port)); default drop.
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_TBL = 0x88B5;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header tbl_t {
    // keys
    bit<16> k16;
    bit<32> k32;
    bit<8>  t1;
    bit<16> t2;
    bit<16> r16;
    bit<8>  o8;
    // outputs
    bit<16> out_exact;
    bit<16> out_lpm;
    bit<16> out_ternary;
    bit<16> out_range;
    bit<16> out_optional;
    bit<16> out_const;
    bit<16> out_constdef;
    bit<16> out_defparam;
    bit<16> out_prof;
    bit<16> out_sel16;
    bit<16> out_sel32;
    bit<8>  sw_tag;
    bit<16> sw_value;
    bit<8>  hit_tag;
    bit<16> out_hit;
    bit<8>  color;      // direct meter of t_ternary: 0 green, 1 yellow, 2 red
}

struct headers_t {
    ethernet_t ethernet;
    tbl_t      tbl;
}

struct metadata_t { }

parser TblParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_TBL: parse_tbl;
            default: accept;
        }
    }
    state parse_tbl {
        packet.extract(hdr.tbl);
        transition accept;
    }
}

control TblVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control TblIngress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) c_exact;
    direct_meter<bit<8>>(MeterType.packets) m_ternary;
    action_profile(128) prof;
    action_selector(HashAlgorithm.crc16, 128, 16) sel16;
    action_selector(HashAlgorithm.crc32, 128, 32) sel32;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action nop() { }

    // fwd: exact ingress_port -> set_port(port); default drop.
    table fwd {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_port; drop; }
        default_action = drop();
    }

    action set_exact(bit<16> v) { hdr.tbl.out_exact = v; }
    table t_exact {
        key = { hdr.tbl.k16: exact; }
        actions = { set_exact; nop; }
        default_action = nop();
        counters = c_exact;
    }

    action set_lpm(bit<16> v) { hdr.tbl.out_lpm = v; }
    table t_lpm {
        key = { hdr.tbl.k32: lpm; }
        actions = { set_lpm; nop; }
        default_action = nop();
    }

    action set_ternary(bit<16> v) {
        hdr.tbl.out_ternary = v;
        m_ternary.read(hdr.tbl.color);
    }
    table t_ternary {
        key = {
            hdr.tbl.t1: ternary;
            hdr.tbl.t2: ternary;
        }
        actions = { set_ternary; nop; }
        default_action = nop();
        meters = m_ternary;
    }

    action set_range(bit<16> v) { hdr.tbl.out_range = v; }
    table t_range {
        key = { hdr.tbl.r16: range; }
        actions = { set_range; nop; }
        default_action = nop();
    }

    action set_optional(bit<16> v) { hdr.tbl.out_optional = v; }
    table t_optional {
        key = { hdr.tbl.o8: optional; }
        actions = { set_optional; nop; }
        default_action = nop();
    }

    action set_const(bit<16> v) { hdr.tbl.out_const = v; }
    table t_const {
        key = { hdr.tbl.o8: exact; }
        actions = { set_const; nop; }
        const entries = {
            1: set_const(0x11);
            2: set_const(0x22);
            3: set_const(0x33);
        }
        default_action = nop();
    }

    action set_constdef(bit<16> v) { hdr.tbl.out_constdef = v; }
    table t_constdef {
        key = { hdr.tbl.k16: exact; }
        actions = { set_constdef; }
        const default_action = set_constdef(0xBEEF);
    }

    action set_defparam(bit<16> v) { hdr.tbl.out_defparam = v; }
    table t_defparam {
        key = { hdr.tbl.k32: exact; }
        actions = { set_defparam; }
        default_action = set_defparam(0x1234);
    }

    action set_prof(bit<16> v) { hdr.tbl.out_prof = v; }
    table t_prof {
        key = { hdr.tbl.k16: exact; }
        actions = { set_prof; nop; }
        default_action = nop();
        implementation = prof;
    }

    action set_sel16(bit<16> v) { hdr.tbl.out_sel16 = v; }
    table t_sel16 {
        key = {
            hdr.tbl.k16: exact;
            hdr.tbl.k32: selector;
            hdr.tbl.t2:  selector;
        }
        actions = { set_sel16; nop; }
        default_action = nop();
        implementation = sel16;
    }

    action set_sel32(bit<16> v) { hdr.tbl.out_sel32 = v; }
    table t_sel32 {
        key = {
            hdr.tbl.k16: exact;
            hdr.tbl.k32: selector;
            hdr.tbl.t2:  selector;
        }
        actions = { set_sel32; nop; }
        default_action = nop();
        implementation = sel32;
    }

    action act_a(bit<16> v) { hdr.tbl.sw_value = v; }
    action act_b(bit<16> v) { hdr.tbl.sw_value = v; }
    table t_switch {
        key = { hdr.tbl.o8: exact; }
        actions = { act_a; act_b; nop; }
        default_action = nop();
    }

    action set_hit(bit<16> v) { hdr.tbl.out_hit = v; }
    table t_hit {
        key = { hdr.tbl.k16: exact; }
        actions = { set_hit; nop; }
        default_action = nop();
    }

    apply {
        fwd.apply();
        if (hdr.tbl.isValid()) {
            t_exact.apply();
            t_lpm.apply();
            t_ternary.apply();
            t_range.apply();
            t_optional.apply();
            t_const.apply();
            t_constdef.apply();
            t_defparam.apply();
            t_prof.apply();
            t_sel16.apply();
            t_sel32.apply();
            switch (t_switch.apply().action_run) {
                act_a: { hdr.tbl.sw_tag = 0xA; }
                act_b: { hdr.tbl.sw_tag = 0xB; }
                default: { hdr.tbl.sw_tag = 0xD; }
            }
            if (t_hit.apply().hit) {
                hdr.tbl.hit_tag = 1;
            } else {
                hdr.tbl.hit_tag = 2;
            }
        }
    }
}

control TblEgress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply { }
}

control TblComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control TblDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.tbl);
    }
}

V1Switch(TblParser(), TblVerifyChecksum(), TblIngress(), TblEgress(),
         TblComputeChecksum(), TblDeparser()) main;
