// Traffic classes: a packet's class is its egress priority queue (standard_metadata.priority),
// chosen by its DSCP. softswitch serves a port's classes by strict priority or weighted round
// robin, each with its own depth, rate, ECN thresholds (ecn.p4's ecn_class_config) and, when the
// controller makes it lossless, 802.1Qbb PFC (softswitch/pfc.py); BMv2 serves them by strict
// priority (simple_switch --priority-queues).

#ifndef __TRAFFIC_CLASS__
#define __TRAFFIC_CLASS__

#include "../header.p4"

control TrafficClass(inout headers_t hdr,
                     inout fabric_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    // The packet's DSCP without INT_DSCP_BIT, which the INT source sets while INT headers ride
    // in the packet: a packet keeps its class along an INT path (classes use DSCPs below 32).
    bit<6> dscp = 0;

    action set_class(bit<3> tc) {
        standard_metadata.priority = tc;
    }

    // dscp_class: the traffic class of an IPv4/IPv6 packet.
    //   key:     DSCP, INT_DSCP_BIT cleared (exact)
    //   actions: set_class(tc); default nop: class 0, every packet's before classes existed
    //   filled by the controller (controller.lossless: each class's DSCPs). Control traffic
    //   keeps its own classes: packet-outs (PRIORITY_CONTROL) and link heartbeats
    //   (PRIORITY_LINK_HEARTBEAT) leave ingress before this table, and packets that are not
    //   IP are not looked up.
    table dscp_class {
        key = {
            dscp: exact @name("dscp");
        }
        actions = {
            set_class;
            @defaultonly nop;
        }
        const default_action = nop();
        size = TRAFFIC_CLASS_TABLE_SIZE;
    }

    apply {
        if (hdr.ipv4.isValid() || hdr.ipv6.isValid()) {
            dscp = meta.parsed_dscp & ~INT_DSCP_BIT;
            dscp_class.apply();
        }
    }
}

#endif  // __TRAFFIC_CLASS__
