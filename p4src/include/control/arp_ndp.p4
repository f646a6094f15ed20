// ARP requests and IPv6 neighbor solicitations answered by the switch:
// the request is turned into the reply in place and sent back out of the
// port it came in on.

#ifndef __ARP_NDP__
#define __ARP_NDP__

#include "../header.p4"

control ArpNdp(inout headers_t hdr,
               inout fabric_metadata_t meta,
               inout standard_metadata_t standard_metadata) {

    // ARP request -> ARP reply: "target_proto_addr is at mac".
    action reply_arp(mac_addr_t mac) {
        hdr.arp.oper = ARP_OPER_REPLY;
        ipv4_addr_t target_ip = hdr.arp.target_proto_addr;
        hdr.arp.target_hw_addr    = hdr.arp.sender_hw_addr;
        hdr.arp.target_proto_addr = hdr.arp.sender_proto_addr;
        hdr.arp.sender_hw_addr    = mac;
        hdr.arp.sender_proto_addr = target_ip;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
        meta.skip_routing = true;
    }

    // arp_reply: proxy ARP for the addresses the switch answers for.
    //   key:     ARP target protocol address (lpm); ARP requests only
    //   actions: reply_arp(mac); default nop (not answered)
    //   filled by the controller: gateway / remote host prefixes -> router MAC.
    table arp_reply {
        key = {
            hdr.arp.target_proto_addr: lpm @name("target_ipv4");
        }
        actions = {
            reply_arp;
            @defaultonly nop;
        }
        const default_action = nop();
        size = ARP_REPLY_TABLE_SIZE;
    }

    // Neighbor solicitation -> solicited neighbor advertisement (R, S, O)
    // with a target link-layer address option carrying mac.
    action reply_ndp(mac_addr_t mac) {
        ipv6_addr_t host_ip = hdr.ipv6.src_addr;
        hdr.ipv6.src_addr  = hdr.ndp.target_addr;
        hdr.ipv6.dst_addr  = host_ip;
        hdr.ipv6.hop_limit = NDP_HOP_LIMIT;
        hdr.icmpv6.type = ICMPV6_TYPE_NA;
        hdr.icmpv6.code = 0;
        hdr.ndp.flags   = NDP_NA_FLAGS;
        hdr.ndp_opt.type = NDP_OPT_TGT_LL_ADDR;
        hdr.ndp_opt.len  = 1;
        hdr.ndp_opt.addr = mac;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
        meta.skip_routing = true;
        meta.ndp_na_generated = true;
    }

    // ndp_reply: the switch answers neighbor solicitations for these targets.
    //   key:     NS target address (lpm); NSs with a source link-layer
    //            address option and nothing else (payload 32 bytes) only
    //   actions: reply_ndp(mac); default nop (not answered)
    //   filled by the controller: gateway / remote host prefixes -> router MAC.
    table ndp_reply {
        key = {
            hdr.ndp.target_addr: lpm @name("target_ipv6");
        }
        actions = {
            reply_ndp;
            @defaultonly nop;
        }
        const default_action = nop();
        size = NDP_REPLY_TABLE_SIZE;
    }

    apply {
        if (hdr.arp.isValid()) {
            if (hdr.arp.oper == ARP_OPER_REQUEST
                    && hdr.arp.hw_type == ARP_HTYPE_ETHERNET
                    && hdr.arp.proto_type == ETHERTYPE_IPV4) {
                arp_reply.apply();
            }
        } else if (hdr.ndp.isValid() && hdr.ndp_opt.isValid()) {
            if (hdr.icmpv6.type == ICMPV6_TYPE_NS
                    && hdr.ndp_opt.type == NDP_OPT_SRC_LL_ADDR
                    && hdr.ipv6.payload_len == NDP_NS_WITH_LL_LEN) {
                ndp_reply.apply();
            }
        }
    }
}

#endif  // __ARP_NDP__
