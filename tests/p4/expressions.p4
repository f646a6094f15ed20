// expressions: P4-16 operators evaluated on the inputs of a `calc` header
// (ethertype 0x88B5); every result is written to a field of its own.
// a % 7 and a / 3 are left out: p4c-bm2-ss only allows / and % on
// compile-time constants.
// Forwarding: fwd (exact ingress_port -> set_port(port)); default drop.
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_CALC = 0x88B5;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header calc_t {
    // inputs
    bit<32> a;
    bit<32> b;
    bit<8>  c;
    int<16> s;
    // outputs, unsigned
    bit<32> add;         // a + b
    bit<32> sub;         // a - b (wraps)
    bit<32> mul;         // a * b (truncated)
    bit<32> shl;         // a << c
    bit<32> shr;         // a >> c
    bit<32> and_;        // a & b
    bit<32> or_;         // a | b
    bit<32> xor_;        // a ^ b
    bit<32> not_;        // ~a
    bit<8>  slice;       // a[15:8]
    bit<16> concat;      // b[7:0] ++ c
    bit<8>  cast8;       // (bit<8>)a
    bit<64> cast64;      // (bit<64>)a
    bit<32> max;         // a > b ? a : b
    bit<32> slice_set;   // a with bits [19:12] replaced by c
    bit<32> sat_add;     // a |+| b
    bit<32> sat_sub;     // a |-| b
    bit<32> shl_const;   // a << 4
    bit<32> shr_const;   // a >> 28
    bit<32> neg;         // -a (two's complement)
    bit<32> mix;         // (a + (bit<32>)c) * 3 ^ (b >> 1)
    // outputs, signed
    int<16> s_sat_add;   // s |+| 1
    int<16> s_sat_sub;   // s |-| 20000
    int<16> s_shr;       // s >> 1 (arithmetic)
    int<8>  s_cast8;     // (int<8>)s
    int<16> s_neg;       // -s
    int<16> s_add;       // s + 1000 (wraps)
    int<32> s_widen;     // (int<32>)s (sign-extended)
    bit<16> s_bits;      // (bit<16>)s
    // comparisons and boolean operators, one bit each
    bit<1>  lt;          // a < b
    bit<1>  ge;          // a >= b
    bit<1>  eq;          // a == b
    bit<1>  ne;          // a != b
    bit<1>  s_neg_flag;  // s < 0
    bit<1>  s_le;        // s <= -5
    bit<1>  land;        // a < b && c != 0
    bit<1>  lor;         // a < b || c == 0
    bit<1>  lnot;        // !(a < b)
    bit<7>  _pad;
}

struct headers_t {
    ethernet_t ethernet;
    calc_t     calc;
}

struct metadata_t { }

parser CalcParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_CALC: parse_calc;
            default: accept;
        }
    }
    state parse_calc {
        packet.extract(hdr.calc);
        transition accept;
    }
}

control CalcVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control CalcIngress(inout headers_t hdr, inout metadata_t meta,
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
        fwd.apply();
        if (hdr.calc.isValid()) {
            bit<32> a = hdr.calc.a;
            bit<32> b = hdr.calc.b;
            bit<8>  c = hdr.calc.c;
            int<16> s = hdr.calc.s;

            hdr.calc.add  = a + b;
            hdr.calc.sub  = a - b;
            hdr.calc.mul  = a * b;
            hdr.calc.shl  = a << c;
            hdr.calc.shr  = a >> c;
            hdr.calc.and_ = a & b;
            hdr.calc.or_  = a | b;
            hdr.calc.xor_ = a ^ b;
            hdr.calc.not_ = ~a;
            hdr.calc.slice  = a[15:8];
            hdr.calc.concat = b[7:0] ++ c;
            hdr.calc.cast8  = (bit<8>)a;
            hdr.calc.cast64 = (bit<64>)a;
            hdr.calc.max = a > b ? a : b;
            bit<32> t = a;
            t[19:12] = c;
            hdr.calc.slice_set = t;
            hdr.calc.sat_add = a |+| b;
            hdr.calc.sat_sub = a |-| b;
            hdr.calc.shl_const = a << 4;
            hdr.calc.shr_const = a >> 28;
            hdr.calc.neg = -a;
            hdr.calc.mix = (a + (bit<32>)c) * 3 ^ (b >> 1);

            hdr.calc.s_sat_add = s |+| 1;
            hdr.calc.s_sat_sub = s |-| 20000;
            hdr.calc.s_shr   = s >> 1;
            hdr.calc.s_cast8 = (int<8>)s;
            hdr.calc.s_neg   = -s;
            hdr.calc.s_add   = s + 1000;
            hdr.calc.s_widen = (int<32>)s;
            hdr.calc.s_bits  = (bit<16>)s;

            hdr.calc.lt   = (bit<1>)(a < b);
            hdr.calc.ge   = (bit<1>)(a >= b);
            hdr.calc.eq   = (bit<1>)(a == b);
            hdr.calc.ne   = (bit<1>)(a != b);
            hdr.calc.s_neg_flag = (bit<1>)(s < 0);
            hdr.calc.s_le = (bit<1>)(s <= -5);
            hdr.calc.land = (bit<1>)(a < b && c != 0);
            hdr.calc.lor  = (bit<1>)(a < b || c == 0);
            hdr.calc.lnot = (bit<1>)(!(a < b));
            hdr.calc._pad = 0;
        }
    }
}

control CalcEgress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    apply { }
}

control CalcComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control CalcDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.calc);
    }
}

V1Switch(CalcParser(), CalcVerifyChecksum(), CalcIngress(), CalcEgress(),
         CalcComputeChecksum(), CalcDeparser()) main;
