// Port liveness and data-plane failover.
//
// The controller's heartbeat monitor (controller/failover/) marks a port dead
// in port_status as soon as a neighbour stops answering, before any route is
// recomputed. Every packet that routing sent to a next id is checked after
// the member choice of next.p4 (ECMP, spray or flowlet) and after a TE pin of
// load_balance.p4: if its egress port is dead, failover moves it to the
// backup member the controller installed for that (next id, port) - another
// member of the same group - so traffic leaves the dead link at once; the
// controller's reroute comes later and removes the dead member from the group.
//
// Heartbeats themselves (ether type ETHERTYPE_HEARTBEAT) are sent by the
// controller as packet-outs on every fabric port and punted to the CPU by the
// receiving switch in packetio.p4.

#ifndef __LIVENESS__
#define __LIVENESS__

#include "../header.p4"

control PortLiveness(inout headers_t hdr,
                     inout fabric_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    bool dead = false;

    action port_down() {
        dead = true;
    }

    // port_status: ports the heartbeat monitor found dead.
    //   key:     port (9 bits, exact): an egress port of this switch
    //   actions: port_down(); default nop (the port is alive)
    //   filled by the controller (controller/failover/): an entry is inserted
    //   when the port's neighbour stopped answering heartbeats and deleted
    //   when it answers again.
    table port_status {
        key = {
            standard_metadata.egress_spec: exact @name("port");
        }
        actions = {
            port_down;
            @defaultonly nop;
        }
        const default_action = nop();
        size = PORT_STATUS_TABLE_SIZE;
    }

    // The backup member: out of port with the link's MAC addresses, as
    // next.p4's route (the TTL was decremented there already).
    action reroute(port_num_t port, mac_addr_t smac, mac_addr_t dmac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
    }

    // failover: the backup of each member of each multi-member group.
    //   key:     next_id (32, exact), port (9, exact): the group and the dead
    //            member's port
    //   actions: reroute(port, smac, dmac); default nop (no backup: the packet
    //            goes to the dead port and is lost, as it would be anyway)
    //   filled by the controller for every member of every group of two or
    //   more members (the backup is the next member of the group, in port
    //   order, wrapping around); looked up only when the chosen port is dead.
    table failover {
        key = {
            meta.next_id:                  exact @name("next_id");
            standard_metadata.egress_spec: exact @name("port");
        }
        actions = {
            reroute;
            @defaultonly nop;
        }
        const default_action = nop();
        size = FAILOVER_TABLE_SIZE;
    }

    apply {
        port_status.apply();
        if (dead) {
            failover.apply();
        }
    }
}

#endif  // __LIVENESS__
