// IPv4/IPv6 routing: longest-prefix match on the destination to a next id.

#ifndef __FORWARDING__
#define __FORWARDING__

#include "../header.p4"

control Forwarding(inout headers_t hdr,
                   inout fabric_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    action set_next_id(next_id_t next_id) {
        meta.next_id = next_id;
        meta.has_next_id = true;
    }

    action drop() {
        mark_to_drop(standard_metadata);
    }

    // routing_v4: IPv4 routes.
    //   key:     IPv4 dst (lpm)
    //   actions: set_next_id(next_id) -> next.hashed; drop; default drop
    //   filled by the controller: host /32s and subnet routes of the fabric.
    table routing_v4 {
        key = {
            hdr.ipv4.dst_addr: lpm @name("ipv4_dst");
        }
        actions = {
            set_next_id;
            drop;
        }
        default_action = drop();
        size = ROUTING_V4_TABLE_SIZE;
    }

    // routing_v6: IPv6 routes; as routing_v4.
    //   key:     IPv6 dst (lpm)
    //   actions: set_next_id(next_id) -> next.hashed; drop; default drop
    table routing_v6 {
        key = {
            hdr.ipv6.dst_addr: lpm @name("ipv6_dst");
        }
        actions = {
            set_next_id;
            drop;
        }
        default_action = drop();
        size = ROUTING_V6_TABLE_SIZE;
    }

    apply {
        // Not routed (the packet stays dropped): IPv4 with options or a bad
        // header checksum, TTL / hop limit <= 1.
        if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.ihl == IPV4_MIN_IHL
                    && standard_metadata.checksum_error == 0
                    && hdr.ipv4.ttl > 1) {
                routing_v4.apply();
            }
        } else if (hdr.ipv6.isValid()) {
            if (hdr.ipv6.hop_limit > 1) {
                routing_v6.apply();
            }
        }
    }
}

#endif  // __FORWARDING__
