// Packet headers and the metadata the fabric pipeline carries.

#ifndef __HEADER__
#define __HEADER__

#include "define.p4"

// Controller headers: P4Runtime PacketOut/PacketIn metadata (CPU_PORT only).
@controller_header("packet_out")
header packet_out_t {
    port_num_t egress_port;      // the packet leaves through this port, untouched
    bit<7>     _pad;
}

@controller_header("packet_in")
header packet_in_t {
    port_num_t ingress_port;     // the port the packet (or its original) came in on
    bit<7>     _pad;
}

// Link heartbeat (ETHERTYPE_LINK_HEARTBEAT), 2 bytes after Ethernet: from the
// generator, the port to send it out of; on the wire, the port it left by.
header link_heartbeat_t {
    bit<7>     _pad;
    port_num_t port;
}

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

// ARP for IPv4 over Ethernet (28 bytes).
header arp_t {
    bit<16>     hw_type;
    bit<16>     proto_type;
    bit<8>      hw_addr_len;
    bit<8>      proto_addr_len;
    bit<16>     oper;
    mac_addr_t  sender_hw_addr;
    ipv4_addr_t sender_proto_addr;
    mac_addr_t  target_hw_addr;
    ipv4_addr_t target_proto_addr;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header ipv6_t {
    bit<4>      version;
    bit<6>      dscp;            // traffic class, upper 6 bits
    bit<2>      ecn;             // traffic class, lower 2 bits
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

header tcp_t {
    bit<16> sport;
    bit<16> dport;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;               // CWR ECE URG ACK PSH RST SYN FIN
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_t {
    bit<16> sport;
    bit<16> dport;
    bit<16> len;
    bit<16> checksum;
}

// First 4 bytes of ICMP; the rest is payload.
header icmp_t {
    bit<8>  type;
    bit<8>  code;
    bit<16> checksum;
}

header icmpv6_t {
    bit<8>  type;
    bit<8>  code;
    bit<16> checksum;
}

// Body of a neighbor solicitation (type 135) or advertisement (type 136).
header ndp_t {
    bit<32>     flags;           // NA: R S O + reserved; NS: reserved
    ipv6_addr_t target_addr;
}

// Source (1) / target (2) link-layer address option for Ethernet.
header ndp_option_t {
    bit<8>     type;
    bit<8>     len;              // in units of 8 bytes: 1
    mac_addr_t addr;
}

// INT shim for TCP/UDP (INT spec v2.1 section 5.6), 4 bytes, right after the
// fixed 20-byte TCP header or the UDP header. NPT 0: INT is flagged by
// INT_DSCP_BIT and the last byte keeps the original DSCP.
header int_shim_t {
    bit<4> int_type;             // INT_TYPE_MD
    bit<2> npt;                  // INT_NPT_DSCP
    bit<2> rsvd1;
    bit<8> len;                  // INT-MD header + hop stack in 4-byte words, shim excluded
    bit<8> rsvd2;
    bit<6> dscp;                 // the packet's DSCP before the source set INT_DSCP_BIT
    bit<2> rsvd3;
}

// INT-MD metadata header (12 bytes).
header int_md_t {
    bit<4>  ver;                 // INT_VERSION
    bit<1>  d;                   // discard: the sink drops the packet after reporting it
    bit<1>  e;                   // a hop could not push: Remaining Hop Count was 0 (or the stack full)
    bit<1>  m;                   // a hop could not push: the egress MTU would be exceeded
    bit<12> rsvd;
    bit<5>  hop_ml;              // INT_HOP_ML
    bit<8>  remaining_hop_cnt;
    bit<16> instruction_bitmap;  // INT_INSTRUCTIONS
    bit<16> domain_id;           // INT_DOMAIN_ID
    bit<16> ds_instruction;
    bit<16> ds_flags;
}

// One hop of INT metadata for INT_INSTRUCTIONS (Hop ML 8, 32 bytes), in
// instruction-bit order. Times in microseconds, queue occupancy in packets.
header int_hop_t {
    bit<32> switch_id;           // bit 0: node id (int_config)
    bit<16> ingress_port_id;     // bit 1: L1 ingress port
    bit<16> egress_port_id;      //        L1 egress port
    bit<32> hop_latency;         // bit 2: egress - ingress global timestamp
    bit<8>  queue_id;            // bit 3: the traffic class (its egress queue)
    bit<24> queue_occupancy;     //        enq_qdepth
    bit<64> ingress_tstamp;      // bit 4: ingress_global_timestamp
    bit<64> egress_tstamp;       // bit 5: egress_global_timestamp
}

// Telemetry Report Group header v2.0 (8 bytes).
header report_group_t {
    bit<4>  ver;                 // REPORT_VERSION
    bit<6>  hw_id;               // REPORT_HW_ID
    bit<22> seq_no;              // per switch (register report_seq)
    bit<32> node_id;             // switch_id
}

// Individual Report header v2.0 (4 bytes).
header report_individual_t {
    bit<4> rep_type;             // REPORT_TYPE_INT
    bit<4> in_type;              // REPORT_IN_TYPE_IPV4 / _IPV6
    bit<8> rep_len;              // words after this one: main contents + MD + inner packet
    bit<8> md_len;               // 0: no optional metadata (the sink's hop is in the stack)
    bit<1> d;
    bit<1> q;
    bit<1> f;                    // tracked flow: 1
    bit<1> i;
    bit<4> rsvd;
}

// Individual report main contents for RepType INT (8 bytes, no optional metadata).
header report_int_t {
    bit<16> rep_md_bits;
    bit<16> domain_id;
    bit<16> ds_md_bits;
    bit<16> ds_md_status;
}

// In-network aggregation header (16 bytes), after UDP to AGG_UDP_PORT.
header agg_h {
    bit<8>  pkt_type;            // AGG_TYPE_CONTRIB / AGG_TYPE_RESULT
    bit<8>  flags;               // AGG_FLAG_OVERFLOW (results)
    bit<16> job_id;
    bit<16> slot;                // within the job's slot range; chunk c uses slot c % slots
    bit<8>  set;                 // 0 or 1: chunk c uses set (c / slots) % 2
    bit<8>  worker_id;           // the sender's child index at the receiving aggregator (< 32)
    bit<8>  num_workers;         // workers of the job (for the hosts)
    bit<8>  exponent;            // biased (e + 127) exponent of the frame; results carry the maximum
    bit<32> seq;                 // chunk index, copied into results
    bit<16> frame_values;        // values the frame carries: AGG_BLOCK_VALUES x 1 .. AGG_MAX_BLOCKS, its job's
}

// One block of an aggregation frame: AGG_BLOCK_VALUES signed 32-bit integers. A frame carries
// frame_values / AGG_BLOCK_VALUES of them (agg_blocks).
header agg_block_h {
    bit<32> v00;
    bit<32> v01;
    bit<32> v02;
    bit<32> v03;
    bit<32> v04;
    bit<32> v05;
    bit<32> v06;
    bit<32> v07;
    bit<32> v08;
    bit<32> v09;
    bit<32> v10;
    bit<32> v11;
    bit<32> v12;
    bit<32> v13;
    bit<32> v14;
    bit<32> v15;
    bit<32> v16;
    bit<32> v17;
    bit<32> v18;
    bit<32> v19;
    bit<32> v20;
    bit<32> v21;
    bit<32> v22;
    bit<32> v23;
    bit<32> v24;
    bit<32> v25;
    bit<32> v26;
    bit<32> v27;
    bit<32> v28;
    bit<32> v29;
    bit<32> v30;
    bit<32> v31;
    bit<32> v32;
    bit<32> v33;
    bit<32> v34;
    bit<32> v35;
    bit<32> v36;
    bit<32> v37;
    bit<32> v38;
    bit<32> v39;
    bit<32> v40;
    bit<32> v41;
    bit<32> v42;
    bit<32> v43;
    bit<32> v44;
    bit<32> v45;
    bit<32> v46;
    bit<32> v47;
    bit<32> v48;
    bit<32> v49;
    bit<32> v50;
    bit<32> v51;
    bit<32> v52;
    bit<32> v53;
    bit<32> v54;
    bit<32> v55;
    bit<32> v56;
    bit<32> v57;
    bit<32> v58;
    bit<32> v59;
    bit<32> v60;
    bit<32> v61;
    bit<32> v62;
    bit<32> v63;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    // Telemetry report encapsulation (report clones only), in front of the
    // inner packet that starts at ipv4/ipv6 (ethernet is then invalid).
    ethernet_t          report_ethernet;
    ipv4_t              report_ipv4;
    udp_t               report_udp;
    report_group_t      report_group;
    report_individual_t report_individual;
    report_int_t        report_int;
    ethernet_t   ethernet;
    link_heartbeat_t link_heartbeat;
    arp_t        arp;
    ipv4_t       ipv4;
    ipv6_t       ipv6;
    tcp_t        tcp;
    udp_t        udp;
    agg_h        agg;
    agg_block_h[AGG_MAX_BLOCKS] agg_blocks;   // the frame's values, block by block
    int_shim_t   int_shim;
    int_md_t     int_md;
    int_hop_t[MAX_INT_HOPS] int_hops;   // int_hops[0]: the latest hop
    icmp_t       icmp;
    icmpv6_t     icmpv6;
    ndp_t        ndp;
    ndp_option_t ndp_opt;
}

// Lookup fields, filled once at the start of ingress (filtering) from the
// packet as received, zero where the header is absent. ECMP hashes ip_src ..
// flow_label; the ACL matches on the Ethernet fields, ip_proto, the L4 ports
// and icmp_type, so it sees the packet as it came in even after an ARP/NDP
// reply or routing rewrote the headers.
struct lookup_metadata_t {
    mac_addr_t eth_src;
    mac_addr_t eth_dst;
    bit<16>    eth_type;
    bit<128> ip_src;             // IPv4 addresses zero-extended
    bit<128> ip_dst;
    bit<8>   ip_proto;           // IPv4 protocol or IPv6 next header
    bit<16>  l4_sport;           // TCP or UDP (RoCEv2: the entropy port)
    bit<16>  l4_dport;
    bit<20>  flow_label;         // IPv6 only, 0 for IPv4
    bit<8>   icmp_type;          // ICMP or ICMPv6
}

// ECN thresholds of the egress port (ecn_config).
struct ecn_metadata_t {
    bit<19> kmin;
    bit<19> kmax;
    bit<16> pmax;                // marking probability at kmax, in 1/65536
}

// INT state of one switch's pass over a packet.
struct int_metadata_t {
    bool    source;              // ingress: watchlist hit, the egress makes it an INT packet
    bit<8>  max_hop;             // ... with this Remaining Hop Count
    bool    sink;                // egress: the port is in sink_ports
    bit<32> switch_id;           // int_config
    bit<16> mtu;                 // int_config: largest IP packet the egress link carries
    bit<32> ip_len;              // IPv4 total length / IPv6 40 + payload length
    // TCP/UDP checksum update (int_common.p4): ones'-complement sums
    bool    l4_csum_update;      // TCP, or UDP with a checksum (not 0)
    bit<16> l4_csum_base;        // what the checksum covers, less the shim, INT-MD header and L4 length
    bit<32> l4_words;            // IntL4Words: shim + INT-MD header + L4 length, as the packet is now
    bit<16> l4_extra;            // the pushed hop, or (sink) the complement of the hops received
    bit<16> l4_csum;             // IntL4Checksum's result
    bit<8>  parse_hops_left;     // parser: hops still to extract
}

// INT headers as metadata (their fields, for the report clone).
struct int_shim_data_t {
    bit<4> int_type;
    bit<2> npt;
    bit<2> rsvd1;
    bit<8> len;
    bit<8> rsvd2;
    bit<6> dscp;
    bit<2> rsvd3;
}

struct int_md_data_t {
    bit<4>  ver;
    bit<1>  d;
    bit<1>  e;
    bit<1>  m;
    bit<12> rsvd;
    bit<5>  hop_ml;
    bit<8>  remaining_hop_cnt;
    bit<16> instruction_bitmap;
    bit<16> domain_id;
    bit<16> ds_instruction;
    bit<16> ds_flags;
}

struct int_hop_data_t {
    bit<32> switch_id;
    bit<16> ingress_port_id;
    bit<16> egress_port_id;
    bit<32> hop_latency;
    bit<8>  queue_id;
    bit<24> queue_occupancy;
    bit<64> ingress_tstamp;
    bit<64> egress_tstamp;
}

// What a report clone needs of the INT packet the sink stripped. BMv2 makes
// the E2E copy when egress ends, with the headers as egress left them
// (without INT) and the metadata reset but for this field list.
struct int_report_metadata_t {
    bool           valid;        // this clone is an INT report
    bit<6>         dscp;         // the packet's DSCP, INT_DSCP_BIT included
    bit<16>        l4_csum;      // TCP/UDP checksum of the INT packet
    int_shim_data_t shim;
    int_md_data_t  md;
    int_hop_data_t hop0;         // int_hops[0], the sink's own hop unless it pushed none
    int_hop_data_t hop1;
    int_hop_data_t hop2;
    int_hop_data_t hop3;
    int_hop_data_t hop4;
    int_hop_data_t hop5;
}

// In-network aggregation state of one packet (aggregation.p4).
struct agg_metadata_t {
    bool    handled;             // this switch aggregates the packet's job: routing skipped
    bool    is_root;
    bit<16> epoch;               // the job's epoch (agg_owner)
    bit<32> slot_base;           // the job's first slot in the pool
    bit<16> slot_count;
    bit<8>  fan_in;              // children whose contributions make a set complete
    bit<16> group;               // multicast group: every child of this switch in the job's tree
    port_num_t parent_port;      // non-root: where partial sums go
    bit<8>  index_at_parent;     // non-root: this switch's child index at its parent
    mac_addr_t own_mac;
    mac_addr_t parent_mac;
    bit<16> frame_values;        // the job's values per frame (agg_jobs)
    bit<8>  parse_blocks_left;   // parser: blocks still to extract
    bit<16> parsed_values;       // parser: the frame's values once all its blocks are extracted
                                 // (frame_values and udp.len agreeing); 0 for any other frame
    bit<32> set_index;           // (slot_base + slot * blocks) * 2 + set: the frame's state
    bit<32> value_base;          // the current block's first accumulator (set index of its pool slot << 6)
    bit<2>  op;                  // AGG_OP_* applied to every value
    bit<32> keep_acc;            // combine: ~0, or 0 to take the packet's values (AGG_OP_WRITE)
    bit<32> keep_packet;         // combine: ~0, or 0 to take the accumulators (AGG_OP_READ)
    bit<32> acc;                 // combine: the accumulator of the value at hand, then 1 if the sum wrapped
    bit<32> value;               // combine: the packet's value at hand (masked as op says)
    bit<1>  overflow;            // an addition saturated
}

// Load balancing state of one packet (load_balance.p4).
struct lb_metadata_t {
    bit<2>  mode;                // LB_MODE_*
    bit<32> gap_us;              // flowlet gap
    bit<32> entropy;             // XORed into next.p4's flow fold: 0 in ecmp mode
}

struct fabric_metadata_t {
    // Ingress port, preserved into the egress of copy_to_cpu clones (BMv2
    // resets standard_metadata in I2E clones) to fill packet_in.ingress_port.
    @field_list(CPU_CLONE_FIELD_LIST)
    port_num_t        cpu_ig_port;
    @field_list(INT_REPORT_FIELD_LIST)
    int_report_metadata_t int_report;
    bool              routable;          // eth dst is a router MAC (my_station)
    bool              skip_routing;      // ARP/NDP reply generated by the switch
    bool              ndp_na_generated;  // recompute the ICMPv6 checksum
    bool              has_next_id;       // routing chose next_id
    next_id_t         next_id;
    lookup_metadata_t lkp;
    bit<6>            parsed_dscp;       // parser: IPv4/IPv6 DSCP, for the INT check
    bit<32>           ecmp_mix;          // ECMP selector field: flow fold * ((seed * ECMP_SEED_SCRAMBLE) | 1)
    ecn_metadata_t    ecn;
    int_metadata_t    int_meta;
    agg_metadata_t    agg;
    lb_metadata_t     lb;
    bit<16>           loss_probability;  // loss.p4: drop probability of the egress port, 1/65536
    bool              lost;              // loss.p4 dropped the packet (not counted as sent)
    bit<16>           sample_probability; // sampling.p4: of the ingress port, 1/65536
}

#endif  // __HEADER__
