// Parser and deparser of the fabric program.

#ifndef __PARSER__
#define __PARSER__

#include "header.p4"

parser FabricParser(packet_in packet,
                    out headers_t hdr,
                    inout fabric_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {

    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default:  parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_ARP:  parse_arp;
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
            ETHERTYPE_LINK_HEARTBEAT: parse_link_heartbeat;
            default:        accept;
        }
    }

    state parse_link_heartbeat {
        packet.extract(hdr.link_heartbeat);
        transition accept;
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        meta.parsed_dscp = hdr.ipv4.dscp;
        // With options (ihl > 5) the L4 header is not where we would look.
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (IPV4_MIN_IHL, PROTO_TCP):  parse_tcp;
            (IPV4_MIN_IHL, PROTO_UDP):  parse_udp;
            (IPV4_MIN_IHL, PROTO_ICMP): parse_icmp;
            default:                    accept;
        }
    }

    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        meta.parsed_dscp = hdr.ipv6.dscp;
        transition select(hdr.ipv6.next_hdr) {
            PROTO_TCP:    parse_tcp;
            PROTO_UDP:    parse_udp;
            PROTO_ICMPV6: parse_icmpv6;
            default:      accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);          // the fixed 20 bytes; INT comes before any options
        transition select(meta.parsed_dscp) {
            INT_DSCP_BIT &&& INT_DSCP_BIT: check_int;
            default:                       accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(meta.parsed_dscp) {
            INT_DSCP_BIT &&& INT_DSCP_BIT: check_int;
            default:                       check_agg;
        }
    }

    // Aggregation packets (IPv4 only) carry no INT: aggregating switches
    // keep them off the watchlist.
    state check_agg {
        transition select(hdr.ipv4.isValid(), hdr.udp.dport) {
            (true, AGG_UDP_PORT): parse_agg;
            default:              accept;
        }
    }

    // The blocks of an aggregation frame are extracted only when it is a frame this fabric
    // makes: frame_values a whole number of blocks (1 .. AGG_MAX_BLOCKS) and the UDP length
    // exactly agg_h and those blocks. Any other (a bad count, a length that disagrees) keeps agg
    // valid with no block and parsed_values 0, as does a frame shorter than its header says (the
    // extraction fails: parser error PacketTooShort, the packet goes on): a switch of the job's
    // tree refuses it (agg_ops REFUSED), any other routes it as plain UDP to the fallback
    // aggregator, which counts it malformed; its bytes pass untouched.
    state parse_agg {
        packet.extract(hdr.agg);
        meta.agg.parse_blocks_left = (bit<8>)(hdr.agg.frame_values >> AGG_BLOCK_SHIFT);
        transition select(hdr.agg.frame_values, hdr.udp.len) {
            (1 * AGG_BLOCK_VALUES, AGG_UDP_BYTES + 1 * AGG_BLOCK_BYTES): parse_agg_block;
            (2 * AGG_BLOCK_VALUES, AGG_UDP_BYTES + 2 * AGG_BLOCK_BYTES): parse_agg_block;
            (3 * AGG_BLOCK_VALUES, AGG_UDP_BYTES + 3 * AGG_BLOCK_BYTES): parse_agg_block;
            (4 * AGG_BLOCK_VALUES, AGG_UDP_BYTES + 4 * AGG_BLOCK_BYTES): parse_agg_block;
            (5 * AGG_BLOCK_VALUES, AGG_UDP_BYTES + 5 * AGG_BLOCK_BYTES): parse_agg_block;   // AGG_MAX_BLOCKS
            default:                                                    accept;
        }
    }

    state parse_agg_block {
        packet.extract(hdr.agg_blocks.next);
        meta.agg.parse_blocks_left = meta.agg.parse_blocks_left - 1;
        transition select(meta.agg.parse_blocks_left) {
            0:       parse_agg_done;
            default: parse_agg_block;
        }
    }

    state parse_agg_done {
        meta.agg.parsed_values = hdr.agg.frame_values;   // every block of the frame is here
        transition accept;
    }

    // INT headers are extracted only if they have exactly the format this
    // fabric writes: shim Type INT-MD with NPT 0, INT-MD Ver 2, Hop ML 8,
    // instructions INT_INSTRUCTIONS, default domain, and a shim length of
    // INT_MD_WORDS + k * INT_HOP_WORDS with k <= MAX_INT_HOPS. Anything else
    // (a foreign INT packet, or a DSCP that has the bit for another reason)
    // is left unparsed: no INT processing, its bytes pass untouched.
    // Shim and INT-MD header, looked at together (128 bits):
    //   [127:124] type  [123:122] npt  [119:112] len
    //   [95:92] ver  [76:72] hop_ml  [63:48] instructions  [47:32] domain id
    state check_int {
        bit<128> look = packet.lookahead<bit<128>>();
        transition select(look[127:124], look[123:122], look[95:92], look[76:72],
                          look[63:48], look[47:32]) {
            (INT_TYPE_MD, INT_NPT_DSCP, INT_VERSION, INT_HOP_ML,
             INT_INSTRUCTIONS, INT_DOMAIN_ID): check_int_len;
            default: accept;
        }
    }

    state check_int_len {
        bit<32> shim = packet.lookahead<bit<32>>();
        transition select(shim[23:16]) {       // length: INT-MD header + k hops
            INT_MD_WORDS:                     parse_int;
            INT_MD_WORDS + 1 * INT_HOP_WORDS: parse_int;
            INT_MD_WORDS + 2 * INT_HOP_WORDS: parse_int;
            INT_MD_WORDS + 3 * INT_HOP_WORDS: parse_int;
            INT_MD_WORDS + 4 * INT_HOP_WORDS: parse_int;
            INT_MD_WORDS + 5 * INT_HOP_WORDS: parse_int;
            INT_MD_WORDS + 6 * INT_HOP_WORDS: parse_int;   // MAX_INT_HOPS
            default:                          accept;
        }
    }

    state parse_int {
        packet.extract(hdr.int_shim);
        packet.extract(hdr.int_md);
        meta.int_meta.parse_hops_left = (hdr.int_shim.len - INT_MD_WORDS) >> 3;   // / INT_HOP_WORDS
        transition parse_int_hops;
    }

    state parse_int_hops {
        transition select(meta.int_meta.parse_hops_left) {
            0:       accept;
            default: parse_int_hop;
        }
    }

    state parse_int_hop {
        packet.extract(hdr.int_hops.next);
        meta.int_meta.parse_hops_left = meta.int_meta.parse_hops_left - 1;
        transition parse_int_hops;
    }

    state parse_icmp {
        packet.extract(hdr.icmp);
        transition accept;
    }

    state parse_icmpv6 {
        packet.extract(hdr.icmpv6);
        transition select(hdr.icmpv6.type) {
            ICMPV6_TYPE_NS: parse_ndp;
            ICMPV6_TYPE_NA: parse_ndp;
            default:        accept;
        }
    }

    state parse_ndp {
        packet.extract(hdr.ndp);
        // An option follows only if the payload is longer than the NS/NA body.
        transition select(hdr.ipv6.payload_len > NDP_NS_BASE_LEN) {
            true:  check_ndp_option;
            false: accept;
        }
    }

    state check_ndp_option {
        transition select(packet.lookahead<bit<8>>()) {
            NDP_OPT_SRC_LL_ADDR: parse_ndp_option;
            NDP_OPT_TGT_LL_ADDR: parse_ndp_option;
            default:             accept;
        }
    }

    state parse_ndp_option {
        packet.extract(hdr.ndp_opt);
        transition accept;
    }
}

control FabricDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.report_ethernet);
        packet.emit(hdr.report_ipv4);
        packet.emit(hdr.report_udp);
        packet.emit(hdr.report_group);
        packet.emit(hdr.report_individual);
        packet.emit(hdr.report_int);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.link_heartbeat);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
        packet.emit(hdr.agg);
        packet.emit(hdr.agg_blocks);
        packet.emit(hdr.int_shim);
        packet.emit(hdr.int_md);
        packet.emit(hdr.int_hops);
        packet.emit(hdr.icmp);
        packet.emit(hdr.icmpv6);
        packet.emit(hdr.ndp);
        packet.emit(hdr.ndp_opt);
    }
}

#endif  // __PARSER__
