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
            default:        accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
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
        transition select(hdr.ipv6.next_hdr) {
            PROTO_TCP:    parse_tcp;
            PROTO_UDP:    parse_udp;
            PROTO_ICMPV6: parse_icmpv6;
            default:      accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition accept;
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
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
        // INT headers go here.
        packet.emit(hdr.icmp);
        packet.emit(hdr.icmpv6);
        packet.emit(hdr.ndp);
        packet.emit(hdr.ndp_opt);
    }
}

#endif  // __PARSER__
