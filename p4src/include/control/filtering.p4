// Ingress port counter, my-station (router MAC) check, lookup fields.

#ifndef __FILTERING__
#define __FILTERING__

#include "../header.p4"

control Filtering(inout headers_t hdr,
                  inout fabric_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    // ingress_port_counter: packets and bytes received per port, indexed by
    // standard_metadata.ingress_port (packet-outs from the CPU excluded).
    // Read by the controller (P4Runtime CounterEntry).
    counter(PORT_COUNTER_SIZE, CounterType.packets_and_bytes) ingress_port_counter;

    action set_routable() {
        meta.routable = true;
    }

    // my_station: frames addressed to a router MAC of this switch are routed.
    //   key:     eth dst (exact)
    //   actions: set_routable; default nop (not routed)
    //   filled by the controller with the switch's router MAC(s).
    table my_station {
        key = {
            hdr.ethernet.dst_addr: exact @name("eth_dst");
        }
        actions = {
            set_routable;
            @defaultonly nop;
        }
        const default_action = nop();
        size = MY_STATION_TABLE_SIZE;
    }

    apply {
        ingress_port_counter.count((bit<32>)standard_metadata.ingress_port);

        // Lookup fields (header.p4, lookup_metadata_t); zero unless valid.
        meta.lkp.eth_src  = hdr.ethernet.src_addr;
        meta.lkp.eth_dst  = hdr.ethernet.dst_addr;
        meta.lkp.eth_type = hdr.ethernet.ether_type;
        if (hdr.ipv4.isValid()) {
            meta.lkp.ip_src   = (bit<128>)hdr.ipv4.src_addr;
            meta.lkp.ip_dst   = (bit<128>)hdr.ipv4.dst_addr;
            meta.lkp.ip_proto = hdr.ipv4.protocol;
        } else if (hdr.ipv6.isValid()) {
            meta.lkp.ip_src     = hdr.ipv6.src_addr;
            meta.lkp.ip_dst     = hdr.ipv6.dst_addr;
            meta.lkp.ip_proto   = hdr.ipv6.next_hdr;
            meta.lkp.flow_label = hdr.ipv6.flow_label;
        }
        if (hdr.tcp.isValid()) {
            meta.lkp.l4_sport = hdr.tcp.sport;
            meta.lkp.l4_dport = hdr.tcp.dport;
        } else if (hdr.udp.isValid()) {
            meta.lkp.l4_sport = hdr.udp.sport;
            meta.lkp.l4_dport = hdr.udp.dport;
        }
        if (hdr.icmp.isValid()) {
            meta.lkp.icmp_type = hdr.icmp.type;
        } else if (hdr.icmpv6.isValid()) {
            meta.lkp.icmp_type = hdr.icmpv6.type;
        }

        my_station.apply();
    }
}

#endif  // __FILTERING__
