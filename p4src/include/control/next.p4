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

    bit<32> hash_seed = 0;

    action set_hash_seed(bit<32> seed) {
        hash_seed = seed;
    }

    // hash_config: this switch's ECMP hash seed (de-polarisation).
    //   key:     none
    //   actions: set_hash_seed(seed); default set_hash_seed(0)
    //   set by the controller (P4Runtime: modify the default entry), a
    //   different seed per switch. With the same hash everywhere, the choice
    //   of an edge and of an aggregation switch are the same function of the
    //   packet, so a flow's second choice is fixed by its first and only some
    //   core links carry traffic (polarisation).
    table hash_config {
        actions = {
            set_hash_seed;
        }
        default_action = set_hash_seed(0);
        size = 1;
    }

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
    //            the UDP source port is the entropy), IPv6 flow label, and
    //            ecmp_mix (a fold of these times the seed of hash_config)
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
            meta.ecmp_mix:       selector;
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
        // The seed must enter the hash non-linearly. CRC is linear over GF(2):
        // crc(fields ^ seed) = crc(fields) ^ crc(seed) ^ crc(0), so XORing (or
        // appending) a seed changes every flow's hash by the same constant and
        // every switch still splits flows into the same classes, only
        // relabelled: a flow's choice at one tier still fixes its choice at the
        // next. Multiplying a fold of the flow fields by an odd number (integer
        // multiplication carries between bits, which GF(2) arithmetic does
        // not) gives each seed its own partition of the flows. The multiplier
        // is (seed * ECMP_SEED_SCRAMBLE) | 1 rather than seed | 1, so that
        // consecutive seeds (switch ids, say) do not give the same multiplier
        // or nearly linear small ones. Seed 0 (unset) multiplies by 1:
        // deterministic, and the same on every switch.
        hash_config.apply();
        bit<32> fold = meta.lkp.ip_src[127:96] ^ meta.lkp.ip_src[95:64]
                     ^ meta.lkp.ip_src[63:32] ^ meta.lkp.ip_src[31:0]
                     ^ meta.lkp.ip_dst[127:96] ^ meta.lkp.ip_dst[95:64]
                     ^ meta.lkp.ip_dst[63:32] ^ meta.lkp.ip_dst[31:0]
                     ^ (meta.lkp.l4_sport ++ meta.lkp.l4_dport)
                     ^ (4w0 ++ meta.lkp.ip_proto ++ meta.lkp.flow_label)
                     ^ meta.lb.entropy;          // load_balance.p4: 0 in ecmp mode
        meta.ecmp_mix = fold * ((hash_seed * ECMP_SEED_SCRAMBLE) | 1);
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
