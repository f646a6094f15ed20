// Next ids: ECMP groups behind an action selector.

#ifndef __NEXT__
#define __NEXT__

#include "../header.p4"

control Next(inout headers_t hdr,
             inout fabric_metadata_t meta,
             inout standard_metadata_t standard_metadata) {

    // ecmp_selector: members are route(...) actions, groups are ECMP groups;
    // a group's member is chosen by crc16 over the selector fields of hashed.
    // Filled by the controller (P4Runtime action profile members and groups).
    action_selector(HashAlgorithm.crc16, ECMP_SELECTOR_SIZE, ECMP_SELECTOR_WIDTH) ecmp_selector;

    // Output to port with the MAC addresses of the link (smac: this switch,
    // dmac: the neighbour); the TTL / hop limit is decremented in apply.
    action route(port_num_t port, mac_addr_t smac, mac_addr_t dmac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
    }

    // hashed: next id -> one member of an ECMP group (or a single action).
    //   key:     next_id (exact); selector fields: IP src/dst (IPv4
    //            zero-extended to 128 bits), IP protocol, L4 ports (RoCEv2:
    //            the UDP source port is the entropy), IPv6 flow label
    //   actions: route(port, smac, dmac); default nop (packet stays dropped;
    //            p4c warns that BMv2 ignores default actions of selector
    //            tables: a miss does nothing there either)
    //   filled by the controller through ecmp_selector.
    table hashed {
        key = {
            meta.next_id:        exact @name("next_id");
            meta.lkp.ip_src:     selector;
            meta.lkp.ip_dst:     selector;
            meta.lkp.ip_proto:   selector;
            meta.lkp.l4_sport:   selector;
            meta.lkp.l4_dport:   selector;
            meta.lkp.flow_label: selector;
        }
        actions = {
            route;
            @defaultonly nop;
        }
        const default_action = nop();
        implementation = ecmp_selector;
        size = NEXT_HASHED_TABLE_SIZE;
    }

    apply {
        switch (hashed.apply().action_run) {
            route: {
                if (hdr.ipv4.isValid()) {
                    hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
                } else if (hdr.ipv6.isValid()) {
                    hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
                }
            }
        }
    }
}

#endif  // __NEXT__
