// INT source selection in ingress: the watchlist of flows to monitor. The
// INT headers themselves are added in egress (int_egress.p4), where the
// source's own hop has its egress port, queue and timestamps.

#ifndef __INT_WATCHLIST__
#define __INT_WATCHLIST__

#include "../header.p4"

control IntWatchlist(inout headers_t hdr,
                     inout fabric_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    // The packet becomes an INT packet in egress, with Remaining Hop Count
    // max_hop (the hops that may push metadata, this switch included).
    action mark_source(bit<8> max_hop) {
        meta.int_meta.source = true;
        meta.int_meta.max_hop = max_hop;
    }

    // watchlist: flows this switch (their first fabric hop) makes INT packets.
    //   key:     IP src/dst (128 bits, IPv4 zero-extended; ternary), IP
    //            protocol (ternary), L4 source/destination port (range), all
    //            as received (lookup_metadata_t); entries need priorities
    //   actions: mark_source(max_hop); default nop (not monitored)
    //   filled by the controller on edge switches (host-facing traffic).
    // Only TCP/UDP over IPv4 without options or IPv6 is looked up, and only
    // when the DSCP does not already have INT_DSCP_BIT: packets carrying INT
    // (ours or foreign) are never made INT packets again.
    table watchlist {
        key = {
            meta.lkp.ip_src:   ternary @name("ip_src");
            meta.lkp.ip_dst:   ternary @name("ip_dst");
            meta.lkp.ip_proto: ternary @name("ip_proto");
            meta.lkp.l4_sport: range   @name("l4_sport");
            meta.lkp.l4_dport: range   @name("l4_dport");
        }
        actions = {
            mark_source;
            @defaultonly nop;
        }
        const default_action = nop();
        size = INT_WATCHLIST_TABLE_SIZE;
    }

    apply {
        if ((hdr.tcp.isValid() || hdr.udp.isValid())
                && (meta.parsed_dscp & INT_DSCP_BIT) == 0) {
            watchlist.apply();
        }
    }
}

#endif  // __INT_WATCHLIST__
