// parser_features: header stack (MPLS, up to 4 labels), header union,
// varbit (IPv4 options), lookahead, verify with a custom error, a parser
// value set; ingress records the parser outcome in a trailing `result`
// header and pushes/pops MPLS labels as table mpls_op says.
//
//   ethertype 0x8847 -> MPLS labels until bos; then lookahead: version 4 -> IPv4
//                       (the byte after the stack is first read into
//                       meta.after_mpls: PacketTooShort when there is none)
//   ethertype 0x88B6 -> selector byte: 1 -> 2-byte variant, 2 -> 4-byte variant
//   ethertype 0x0800 -> IPv4 (version must be 4: error IPv4BadVersion;
//                       ihl >= 5: error IPv4BadIhl) + options (varbit)
//   ethertype 0x88B7 -> one byte matched against value set `pvs` (size 4)
//   ethertype 0x88B8 -> vl_len (vl_bits, skip_bits), advance(skip_bits), then
//                       header vl with a varbit<64> of vl_bits bits
//
// Forwarding: fwd (exact ingress_port -> set_port(port)); default drop.
// mpls_op: exact ingress_port -> push_label(label) | pop_label | nop.
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_IPV4  = 0x0800;
const bit<16> ETHERTYPE_MPLS  = 0x8847;
const bit<16> ETHERTYPE_UNION = 0x88B6;
const bit<16> ETHERTYPE_PVS   = 0x88B7;
const bit<16> ETHERTYPE_VL    = 0x88B8;
#define MPLS_DEPTH 4

error { IPv4BadVersion, IPv4BadIhl }

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header mpls_t {
    bit<20> label;
    bit<3>  tc;
    bit<1>  bos;
    bit<8>  ttl;
}

header union_sel_t {
    bit<8> sel;
}

header short_t {
    bit<16> value;
}

header long_t {
    bit<32> value;
}

header_union variant_t {
    short_t short;
    long_t  long;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header ipv4_options_t {
    varbit<320> options;
}

header pvs_t {
    bit<8> value;
}

header vl_len_t {
    bit<8> vl_bits;         // length of vl.data in bits
    bit<8> skip_bits;       // bits skipped (advance) between vl_len and vl
}

header vl_t {
    varbit<64> data;
}

// Written by ingress after the parsed headers.
header result_t {
    bit<8>  parser_error;   // 0 NoError, 1 PacketTooShort, 2 NoMatch,
                            // 3 StackOutOfBounds, 4 HeaderTooShort,
                            // 5 ParserTimeout, 6 ParserInvalidArgument,
                            // 7 IPv4BadVersion, 8 IPv4BadIhl, 255 other
    bit<8>  mpls_depth;     // valid MPLS labels after mpls_op
    bit<8>  variant;        // 0 none, 1 short, 2 long
    bit<8>  pvs_hit;        // 1 if the byte after 0x88B7 is in pvs
    bit<8>  ipv4_opt_bytes; // length of the IPv4 options
    bit<8>  lookahead_ipv4; // 1 if IPv4 was found under MPLS by lookahead
    bit<8>  after_mpls;     // the byte after the MPLS stack (lookahead), else 0
}

struct headers_t {
    ethernet_t        ethernet;
    mpls_t[MPLS_DEPTH] mpls;
    union_sel_t       union_sel;
    variant_t         variant;
    ipv4_t            ipv4;
    ipv4_options_t    ipv4_opts;
    pvs_t             pvs;
    vl_len_t          vl_len;
    vl_t              vl;
    result_t          result;
}

struct metadata_t {
    bit<8> pvs_hit;
    bit<8> lookahead_ipv4;
    bit<8> after_mpls;
}

parser FeatureParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    // pvs: bytes (after ethertype 0x88B7) that set result.pvs_hit;
    // filled by the controller (P4Runtime ValueSetEntry, up to 4 members).
    value_set<bit<8>>(4) pvs;

    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_MPLS:  parse_mpls;
            ETHERTYPE_UNION: parse_union;
            ETHERTYPE_IPV4:  parse_ipv4;
            ETHERTYPE_PVS:   parse_pvs;
            ETHERTYPE_VL:    parse_vl;
            default: accept;
        }
    }

    state parse_mpls {
        packet.extract(hdr.mpls.next);
        transition select(hdr.mpls.last.bos) {
            0: parse_mpls;
            1: after_mpls;
        }
    }

    state after_mpls {
        meta.after_mpls = packet.lookahead<bit<8>>();
        transition select(packet.lookahead<bit<4>>()) {
            4: mpls_ipv4;
            default: accept;
        }
    }

    state mpls_ipv4 {
        meta.lookahead_ipv4 = 1;
        transition parse_ipv4;
    }

    state parse_union {
        packet.extract(hdr.union_sel);
        transition select(hdr.union_sel.sel) {
            1: parse_short;
            2: parse_long;
            default: accept;
        }
    }

    state parse_short {
        packet.extract(hdr.variant.short);
        transition accept;
    }

    state parse_long {
        packet.extract(hdr.variant.long);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.IPv4BadVersion);
        verify(hdr.ipv4.ihl >= 5, error.IPv4BadIhl);
        packet.extract(hdr.ipv4_opts, (bit<32>)(hdr.ipv4.ihl - 5) * 32);
        transition accept;
    }

    state parse_pvs {
        packet.extract(hdr.pvs);
        transition select(hdr.pvs.value) {
            pvs: pvs_hit;
            default: accept;
        }
    }

    state pvs_hit {
        meta.pvs_hit = 1;
        transition accept;
    }

    state parse_vl {
        packet.extract(hdr.vl_len);
        packet.advance((bit<32>)hdr.vl_len.skip_bits);
        packet.extract(hdr.vl, (bit<32>)hdr.vl_len.vl_bits);
        transition accept;
    }
}

control FeatureVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control FeatureIngress(inout headers_t hdr, inout metadata_t meta,
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

    // New outermost label; bos set if it is the only one.
    action push_label(bit<20> label) {
        hdr.mpls.push_front(1);
        hdr.mpls[0].setValid();
        hdr.mpls[0].label = label;
        hdr.mpls[0].tc = 0;
        hdr.mpls[0].bos = hdr.mpls[1].isValid() ? 1w0 : 1w1;
        hdr.mpls[0].ttl = 64;
        hdr.ethernet.ether_type = ETHERTYPE_MPLS;
    }

    // Remove the outermost label; IPv4 ethertype once the stack is empty.
    action pop_label() {
        hdr.mpls.pop_front(1);
        hdr.ethernet.ether_type = hdr.mpls[0].isValid() ? ETHERTYPE_MPLS : ETHERTYPE_IPV4;
    }

    action nop() { }

    // mpls_op: exact ingress_port -> push_label(label) | pop_label | nop; default nop.
    table mpls_op {
        key = { standard_metadata.ingress_port: exact; }
        actions = { push_label; pop_label; nop; }
        default_action = nop();
    }

    apply {
        fwd.apply();
        if (hdr.mpls[0].isValid() || hdr.ipv4.isValid()) {
            mpls_op.apply();
        }

        hdr.result.setValid();
        if (standard_metadata.parser_error == error.NoError) {
            hdr.result.parser_error = 0;
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            hdr.result.parser_error = 1;
        } else if (standard_metadata.parser_error == error.NoMatch) {
            hdr.result.parser_error = 2;
        } else if (standard_metadata.parser_error == error.StackOutOfBounds) {
            hdr.result.parser_error = 3;
        } else if (standard_metadata.parser_error == error.HeaderTooShort) {
            hdr.result.parser_error = 4;
        } else if (standard_metadata.parser_error == error.ParserTimeout) {
            hdr.result.parser_error = 5;
        } else if (standard_metadata.parser_error == error.ParserInvalidArgument) {
            hdr.result.parser_error = 6;
        } else if (standard_metadata.parser_error == error.IPv4BadVersion) {
            hdr.result.parser_error = 7;
        } else if (standard_metadata.parser_error == error.IPv4BadIhl) {
            hdr.result.parser_error = 8;
        } else {
            hdr.result.parser_error = 255;
        }

        bit<8> depth = 0;
        if (hdr.mpls[0].isValid()) { depth = depth + 1; }
        if (hdr.mpls[1].isValid()) { depth = depth + 1; }
        if (hdr.mpls[2].isValid()) { depth = depth + 1; }
        if (hdr.mpls[3].isValid()) { depth = depth + 1; }
        hdr.result.mpls_depth = depth;

        if (hdr.variant.short.isValid()) {
            hdr.result.variant = 1;
        } else if (hdr.variant.long.isValid()) {
            hdr.result.variant = 2;
        } else {
            hdr.result.variant = 0;
        }
        hdr.result.pvs_hit = meta.pvs_hit;
        if (hdr.ipv4.isValid()) {
            hdr.result.ipv4_opt_bytes = ((bit<8>)hdr.ipv4.ihl - 5) * 4;
        } else {
            hdr.result.ipv4_opt_bytes = 0;
        }
        hdr.result.lookahead_ipv4 = meta.lookahead_ipv4;
        hdr.result.after_mpls = meta.after_mpls;
    }
}

control FeatureEgress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    apply { }
}

control FeatureComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control FeatureDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.mpls);
        packet.emit(hdr.union_sel);
        packet.emit(hdr.variant);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_opts);
        packet.emit(hdr.pvs);
        packet.emit(hdr.vl_len);
        packet.emit(hdr.vl);
        packet.emit(hdr.result);
    }
}

V1Switch(FeatureParser(), FeatureVerifyChecksum(), FeatureIngress(), FeatureEgress(),
         FeatureComputeChecksum(), FeatureDeparser()) main;
