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
//
// Faster, and without the controller: link heartbeats in the data plane, in
// BFD's manner. The switch's generator (HEARTBEAT_GEN_PORT) injects one
// ETHERTYPE_LINK_HEARTBEAT frame per fabric port and interval; LinkHeartbeat
// sends each out of the port it names, and on the neighbour it stamps
// port_last_heard with the arrival time. A port in heartbeat_watch whose last
// heartbeat is older than the switch's latest one (on any port) by more than
// its timeout counts as dead exactly like a port_status entry, so failover
// moves its traffic within interval x multiplier of the failure, and back as
// soon as heartbeats come again. Silence is measured against the latest
// heartbeat, not the packet's own time, so that a switch that was starved of
// CPU and works through its backlog does not find every port silent. A backup
// silent for longer than the chosen port is not taken (the packet keeps it).

#ifndef __LIVENESS__
#define __LIVENESS__

#include "../header.p4"

// port_last_heard: when the last link heartbeat arrived on each port
// (ingress_global_timestamp, microseconds of this switch's clock); 0: none
// since the switch started. Written by LinkHeartbeat, read by PortFailover;
// the controller may read it (P4Runtime RegisterEntry), never writes it.
register<bit<48>>(PORT_FAILOVER_SIZE) port_last_heard;
// latest_heartbeat: the arrival time of the latest link heartbeat on any port
// (one cell); the reference a port's silence is measured against.
register<bit<48>>(1) latest_heartbeat;

control LinkHeartbeat(inout headers_t hdr,
                      inout fabric_metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    apply {
        if (!hdr.link_heartbeat.isValid()) {
            return;
        }
        if (standard_metadata.ingress_port == HEARTBEAT_GEN_PORT) {
            // The generator's tick: out of the port it names, ahead of data.
            standard_metadata.egress_spec = hdr.link_heartbeat.port;
            standard_metadata.priority = PRIORITY_LINK_HEARTBEAT;
        } else {
            // A neighbour's heartbeat: heard, and consumed here.
            port_last_heard.write((bit<32>)standard_metadata.ingress_port,
                                  standard_metadata.ingress_global_timestamp);
            latest_heartbeat.write(0, standard_metadata.ingress_global_timestamp);
            mark_to_drop(standard_metadata);
        }
        exit;
    }
}

control PortFailover(inout headers_t hdr,
                     inout fabric_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    bool dead = false;
    bool watched = false;
    bit<48> timeout = 0;
    bit<48> last_heard = 0;
    bit<48> latest = 0;

    // failed_over: packets moved off each dead port (indexed by that port) to
    // a backup, whether by port_status or by silence. Read by the controller
    // and benchmarks (P4Runtime CounterEntry); a count while nothing failed
    // tells spurious silences.
    counter(PORT_FAILOVER_SIZE, CounterType.packets) failed_over;

    action port_down() {
        dead = true;
    }

    action watch(bit<48> timeout_us) {
        watched = true;
        timeout = timeout_us;
        port_last_heard.read(last_heard, (bit<32>)standard_metadata.egress_spec);
        latest_heartbeat.read(latest, 0);
    }

    // heartbeat_watch: fabric ports judged by their link heartbeats.
    //   key:     port (9 bits, exact): an egress port of this switch
    //   actions: watch(timeout_us): the port is dead once its last link
    //            heartbeat is older than latest_heartbeat by more than
    //            timeout_us (interval x multiplier);
    //            a port that has heard none since the switch started is alive
    //            (not armed yet); default nop (not watched)
    //   filled by the controller (controller/failover/) for every fabric port
    //   while link heartbeats run.
    table heartbeat_watch {
        key = {
            standard_metadata.egress_spec: exact @name("port");
        }
        actions = {
            watch;
            @defaultonly nop;
        }
        const default_action = nop();
        size = HEARTBEAT_WATCH_TABLE_SIZE;
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
        heartbeat_watch.apply();
        if (watched && last_heard != 0 && latest - last_heard > timeout) {
            dead = true;
        }
        if (dead) {
            bit<48> chosen_heard = last_heard;
            port_num_t chosen = standard_metadata.egress_spec;
            mac_addr_t chosen_smac = hdr.ethernet.src_addr;
            mac_addr_t chosen_dmac = hdr.ethernet.dst_addr;
            failover.apply();
            // A backup silent for longer than the chosen port is worse: keep the
            // choice. (Under load a neighbour is sometimes heard late; then the
            // backup of a port silent for a moment may be the one that failed.)
            if (watched && standard_metadata.egress_spec != chosen) {
                port_last_heard.read(last_heard, (bit<32>)standard_metadata.egress_spec);
                if (last_heard != 0 && latest - last_heard > timeout && last_heard < chosen_heard) {
                    standard_metadata.egress_spec = chosen;
                    hdr.ethernet.src_addr = chosen_smac;
                    hdr.ethernet.dst_addr = chosen_dmac;
                }
            }
            if (standard_metadata.egress_spec != chosen) {
                failed_over.count((bit<32>)chosen);
            }
        }
    }
}

#endif  // __LIVENESS__
