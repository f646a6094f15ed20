// aifabric: the fabric switch program (P4-16, v1model; BMv2 and softswitch).
// Layout and control-plane contract: p4src/README.md.

#include <core.p4>
#include <v1model.p4>

#include "include/define.p4"
#include "include/header.p4"
#include "include/parser.p4"
#include "include/checksum.p4"
#include "include/control/packetio.p4"
#include "include/control/filtering.p4"
#include "include/control/arp_ndp.p4"
#include "include/control/forwarding.p4"
#include "include/control/next.p4"
#include "include/control/acl.p4"
#include "include/control/int_watchlist.p4"
#include "include/control/ecn.p4"
#include "include/control/int_egress.p4"
#include "include/control/aggregation.p4"
#include "include/control/loss.p4"
#include "include/control/load_balance.p4"
#include "include/control/failover.p4"
#include "include/control/sampling.p4"
#include "include/control/traffic_class.p4"

control FabricIngress(inout headers_t hdr,
                      inout fabric_metadata_t meta,
                      inout standard_metadata_t standard_metadata) {

    PacketIoIngress() packetio;
    Filtering() filtering;
    ArpNdp() arp_ndp;
    Forwarding() forwarding;
    Next() next;
    Acl() acl;
    IntWatchlist() int_watchlist;
    Aggregation() aggregation;
    LoadBalance() load_balance;
    TeOverride() te_override;
    LinkHeartbeat() link_heartbeat;
    PortFailover() port_failover;
    FlowSampling() flow_sampling;
    TrafficClass() traffic_class;

    apply {
        meta.cpu_ig_port = standard_metadata.ingress_port;
        packetio.apply(hdr, meta, standard_metadata);   // packet-outs exit here
        link_heartbeat.apply(hdr, meta, standard_metadata);   // link heartbeats exit here
        // Unless a reply, a route or the ACL chooses a port, the packet is
        // dropped (BMv2 would otherwise send it to port 0).
        mark_to_drop(standard_metadata);
        filtering.apply(hdr, meta, standard_metadata);
        arp_ndp.apply(hdr, meta, standard_metadata);
        aggregation.apply(hdr, meta, standard_metadata);   // a tree switch of the job: skips routing
        if (meta.routable && !meta.skip_routing) {
            forwarding.apply(hdr, meta, standard_metadata);
            if (meta.has_next_id) {
                load_balance.apply(hdr, meta, standard_metadata);
                next.apply(hdr, meta, standard_metadata);
                te_override.apply(hdr, meta, standard_metadata);
                port_failover.apply(hdr, meta, standard_metadata);   // a dead port's backup member
            }
        }
        if (!meta.agg.handled) {
            int_watchlist.apply(hdr, meta, standard_metadata);
            flow_sampling.apply(hdr, meta, standard_metadata);   // before the ACL: its copy wins
        }
        traffic_class.apply(hdr, meta, standard_metadata);   // the egress queue: DSCP -> class
        acl.apply(hdr, meta, standard_metadata);
    }
}

control FabricEgress(inout headers_t hdr,
                     inout fabric_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    PacketIoEgress() packetio;
    Ecn() ecn;
    IntEgress() int_egress;
    AggregationEgress() aggregation;
    Loss() loss;

    // egress_port_counter: packets and bytes sent per port (CPU_PORT
    // included, counted once), indexed by standard_metadata.egress_port;
    // link heartbeats are not counted (at 100 a second per fabric port they
    // would swamp the traffic that tests and benchmarks read here).
    // Read by the controller (P4Runtime CounterEntry).
    counter(PORT_COUNTER_SIZE, CounterType.packets_and_bytes) egress_port_counter;

    apply {
        packetio.apply(hdr, meta, standard_metadata);
        aggregation.apply(hdr, meta, standard_metadata);
        // Clones are copies for the controller or the collector: never marked.
        if (standard_metadata.instance_type != PKT_INSTANCE_TYPE_INGRESS_CLONE
                && standard_metadata.instance_type != PKT_INSTANCE_TYPE_EGRESS_CLONE) {
            ecn.apply(hdr, meta, standard_metadata);
        }
        int_egress.apply(hdr, meta, standard_metadata);
        if (standard_metadata.instance_type == PKT_INSTANCE_TYPE_NORMAL
                || standard_metadata.instance_type == PKT_INSTANCE_TYPE_REPLICATION) {
            loss.apply(hdr, meta, standard_metadata);   // emulated link loss, if configured
        }
        if (!meta.lost && !hdr.link_heartbeat.isValid()) {
            egress_port_counter.count((bit<32>)standard_metadata.egress_port);
        }
    }
}

V1Switch(
    FabricParser(),
    FabricVerifyChecksum(),
    FabricIngress(),
    FabricEgress(),
    FabricComputeChecksum(),
    FabricDeparser()
) main;
