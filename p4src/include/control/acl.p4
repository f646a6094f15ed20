// Ternary ACL: punt to the CPU, copy to the CPU, drop.

#ifndef __ACL__
#define __ACL__

#include "../header.p4"

control Acl(inout headers_t hdr,
            inout fabric_metadata_t meta,
            inout standard_metadata_t standard_metadata) {

    // acl_counter: packets and bytes per acl entry (P4Runtime DirectCounterEntry).
    direct_counter(CounterType.packets_and_bytes) acl_counter;

    // The packet goes to the controller instead of its destination, as the
    // pipeline left it (a routed packet has its MACs rewritten and its TTL
    // decremented, an ARP/NDP request has become the reply).
    action punt_to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
    }

    // A copy of the packet as received goes to the controller through clone
    // session CPU_CLONE_SESSION_ID; the packet itself carries on.
    action copy_to_cpu() {
        clone_preserving_field_list(CloneType.I2E, CPU_CLONE_SESSION_ID, CPU_CLONE_FIELD_LIST);
    }

    action drop() {
        mark_to_drop(standard_metadata);
    }

    // acl: applied to every packet but packet-outs, after ARP/NDP and routing.
    //   key:     ingress port, eth src/dst/type, IP protocol, L4 ports, ICMP
    //            or ICMPv6 type (all ternary; as received, see lookup_metadata_t)
    //   actions: punt_to_cpu, copy_to_cpu, drop, nop; default nop
    //   filled by the controller (e.g. copy ARP/NDP to learn hosts without
    //   swallowing the switch's replies, punt LLDP); entries need priorities.
    table acl {
        key = {
            standard_metadata.ingress_port: ternary @name("ig_port");
            meta.lkp.eth_src:   ternary @name("eth_src");
            meta.lkp.eth_dst:   ternary @name("eth_dst");
            meta.lkp.eth_type:  ternary @name("eth_type");
            meta.lkp.ip_proto:  ternary @name("ip_proto");
            meta.lkp.l4_sport:  ternary @name("l4_sport");
            meta.lkp.l4_dport:  ternary @name("l4_dport");
            meta.lkp.icmp_type: ternary @name("icmp_type");
        }
        actions = {
            punt_to_cpu;
            copy_to_cpu;
            drop;
            nop;
        }
        const default_action = nop();
        counters = acl_counter;
        size = ACL_TABLE_SIZE;
    }

    apply {
        acl.apply();
    }
}

#endif  // __ACL__
