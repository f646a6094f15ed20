// Load balancing over the ECMP groups of next.p4, chosen per switch at run
// time, and traffic-engineering overrides that win over every mode.
//
//   ecmp:    a flow's packets hash alike (next.p4's hash as it was);
//   spray:   every packet draws a new random entropy, so it picks a member
//            of the group anew (random, not round robin: BMv2's random() is
//            what both targets have without per-group state);
//   flowlet: a flow keeps its entropy, so its member, until it pauses for
//            longer than the gap the controller set; then it draws a new one
//            (the next flowlet id).
// The entropy enters next.p4's ecmp_mix (XORed into the flow fold before the
// seeded multiplication), so the selector stays the one action selector.

#ifndef __LOAD_BALANCE__
#define __LOAD_BALANCE__

#include "../header.p4"

control LoadBalance(inout headers_t hdr,
                    inout fabric_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {

    // Per flow slot (a hash of the 5-tuple, FLOWLET_SLOTS entries; flows that
    // share a slot share a flowlet): when its last packet arrived (µs,
    // ingress_global_timestamp) and its flowlet id. Data plane only.
    register<bit<48>>(FLOWLET_SLOTS) flowlet_last_seen;
    register<bit<16>>(FLOWLET_SLOTS) flowlet_id;

    action ecmp() {
        meta.lb.mode = LB_MODE_ECMP;
    }

    action spray() {
        meta.lb.mode = LB_MODE_SPRAY;
    }

    // gap_us: a pause longer than this starts a new flowlet.
    action flowlet(bit<32> gap_us) {
        meta.lb.mode = LB_MODE_FLOWLET;
        meta.lb.gap_us = gap_us;
    }

    // lb_mode: this switch's load-balancing mode.
    //   key:     none
    //   actions: ecmp(); spray(); flowlet(gap_us); default ecmp()
    //   set by the controller (P4Runtime: modify the default entry) at any
    //   time; the next packet uses the new mode.
    table lb_mode {
        actions = {
            ecmp;
            spray;
            flowlet;
        }
        default_action = ecmp();
        size = 1;
    }

    apply {
        meta.lb.entropy = 0;
        lb_mode.apply();
        if (meta.lb.mode == LB_MODE_SPRAY) {
            random(meta.lb.entropy, 1, 0xFFFFFFFF);
        } else if (meta.lb.mode == LB_MODE_FLOWLET) {
            bit<32> slot;
            hash(slot, HashAlgorithm.crc32, 32w0,
                 { meta.lkp.ip_src, meta.lkp.ip_dst, meta.lkp.ip_proto,
                   meta.lkp.l4_sport, meta.lkp.l4_dport, meta.lkp.flow_label },
                 FLOWLET_SLOTS);
            bit<48> last;
            bit<16> id;
            flowlet_last_seen.read(last, slot);
            flowlet_id.read(id, slot);
            bit<48> now = standard_metadata.ingress_global_timestamp;
            if (now - last > (bit<48>)meta.lb.gap_us) {
                id = id + 1;
                flowlet_id.write(slot, id);
            }
            flowlet_last_seen.write(slot, now);
            meta.lb.entropy = (bit<32>)id * FLOWLET_ID_SCRAMBLE;
        }
    }
}

control TeOverride(inout headers_t hdr,
                   inout fabric_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    // te_pinned: packets and bytes of each pinned flow (the TE engine reads
    // them to see its flows' rates).
    direct_counter(CounterType.packets_and_bytes) te_pinned;

    // Output to port with the link's MAC addresses, as next.p4's route (the
    // TTL was decremented there already).
    action pin(port_num_t port, mac_addr_t smac, mac_addr_t dmac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        te_pinned.count();
    }

    // te_override: flows pinned to a next hop by traffic engineering.
    //   key:     the 5-tuple as received (lkp: IP src/dst, IPv4 zero-extended
    //            to 128 bits; IP protocol; L4 ports), exact
    //   actions: pin(port, smac, dmac); default nop (the group's choice stands)
    //   filled by the TE engine (controller/load_balance/te/); applies only to packets
    //   that routing sent to a next id, and wins over every lb_mode.
    table te_override {
        key = {
            meta.lkp.ip_src:   exact @name("ip_src");
            meta.lkp.ip_dst:   exact @name("ip_dst");
            meta.lkp.ip_proto: exact @name("ip_proto");
            meta.lkp.l4_sport: exact @name("l4_sport");
            meta.lkp.l4_dport: exact @name("l4_dport");
        }
        actions = {
            pin;
            @defaultonly nop;
        }
        const default_action = nop();
        counters = te_pinned;
        size = TE_OVERRIDE_TABLE_SIZE;
    }

    apply {
        te_override.apply();
    }
}

#endif  // __LOAD_BALANCE__
