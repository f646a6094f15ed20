// Constants, sizes and type aliases of the fabric program.
// Everything a controller or a test must agree on is named here.

#ifndef __DEFINE__
#define __DEFINE__

typedef bit<9>   port_num_t;
typedef bit<48>  mac_addr_t;
typedef bit<32>  ipv4_addr_t;
typedef bit<128> ipv6_addr_t;
typedef bit<32>  next_id_t;

// Ports. Start targets with `--cpu-port 255`; BMv2 drops packets sent to 511.
const port_num_t CPU_PORT  = 255;
const port_num_t DROP_PORT = 511;
// The switch's link-heartbeat generator (emulation/failover_heartbeat_generator.py,
// the emulated counterpart of an ASIC's packet generator) injects here: start
// targets with `-i 254@<switch>-hbg` where data-plane heartbeats are wanted.
const port_num_t HEARTBEAT_GEN_PORT = 254;

// Egress priority of packet-outs (the controller's heartbeats among them): they
// leave a congested port ahead of queued data, as BFD's packets do on a switch.
// Start targets with `--priority-queues 8` (emulation/p4switch.py does): with
// fewer queues than that, a target drops the packet (BMv2 and softswitch alike).
const bit<3> PRIORITY_CONTROL = 7;
// Egress priority of link heartbeats (include/control/failover.p4): ahead of
// data too, but in a queue of their own, so that on a link slower than they
// come (an emulated link of a few dozen packets a second) it is theirs that
// overflow, not the controller's packet-outs.
const bit<3> PRIORITY_LINK_HEARTBEAT = 6;

// Clone session of copy_to_cpu; the controller configures it (P4Runtime
// CloneSessionEntry) with a single replica to CPU_PORT.
const bit<32> CPU_CLONE_SESSION_ID = 511;
// Field list preserved in clones to the CPU (see fabric_metadata_t.cpu_ig_port).
#define CPU_CLONE_FIELD_LIST 1

// Ether types.
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<16> ETHERTYPE_IPV6 = 0x86dd;
// Heartbeats between neighbouring switches (IEEE local experimental ether type);
// see include/control/failover.p4 and controller/failover/.
const bit<16> ETHERTYPE_HEARTBEAT = 0x88b5;
// Link heartbeats kept in the data plane (include/control/failover.p4): sent
// through HEARTBEAT_GEN_PORT, heard by the neighbour's pipeline, never punted.
const bit<16> ETHERTYPE_LINK_HEARTBEAT = 0x88b6;

// IP protocol numbers / IPv6 next headers.
const bit<8> PROTO_ICMP   = 1;
const bit<8> PROTO_TCP    = 6;
const bit<8> PROTO_UDP    = 17;
const bit<8> PROTO_ICMPV6 = 58;

const bit<4> IPV4_MIN_IHL = 5;      // IPv4 without options; others are not routed

// Header sizes in bytes (for length arithmetic).
const bit<32> ETH_HEADER_BYTES  = 14;
const bit<32> IPV4_HEADER_BYTES = 20;   // without options
const bit<32> IPV6_HEADER_BYTES = 40;
const bit<32> TCP_HEADER_BYTES  = 20;   // the fixed part: INT goes before any option
const bit<32> UDP_HEADER_BYTES  = 8;

// UDP destination port of RoCEv2; its source port carries the flow entropy.
const bit<16> UDP_PORT_ROCEV2 = 4791;

// ARP (IPv4 over Ethernet).
const bit<16> ARP_HTYPE_ETHERNET = 1;
const bit<16> ARP_OPER_REQUEST   = 1;
const bit<16> ARP_OPER_REPLY     = 2;

// ICMPv6 neighbor discovery.
const bit<8>  ICMPV6_TYPE_NS       = 135;
const bit<8>  ICMPV6_TYPE_NA       = 136;
const bit<8>  NDP_OPT_SRC_LL_ADDR  = 1;
const bit<8>  NDP_OPT_TGT_LL_ADDR  = 2;
const bit<32> NDP_NA_FLAGS         = 0xE0000000;  // Router, Solicited, Override
const bit<8>  NDP_HOP_LIMIT        = 255;
// ICMPv6 header (4) + NS/NA body (20): an NS longer than this carries options.
const bit<16> NDP_NS_BASE_LEN      = 24;
// NS with exactly one link-layer address option (8 bytes): the only NS answered.
const bit<16> NDP_NS_WITH_LL_LEN   = 32;

// standard_metadata.instance_type values of BMv2's simple_switch.
const bit<32> PKT_INSTANCE_TYPE_NORMAL        = 0;
const bit<32> PKT_INSTANCE_TYPE_INGRESS_CLONE = 1;
const bit<32> PKT_INSTANCE_TYPE_EGRESS_CLONE  = 2;
const bit<32> PKT_INSTANCE_TYPE_REPLICATION   = 5;   // a multicast copy

// ECN codepoints (IPv4 ECN field, IPv6 traffic class low 2 bits; RFC 3168).
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_ECT1    = 1;
const bit<2> ECN_ECT0    = 2;
const bit<2> ECN_CE      = 3;

// INT-MD over TCP/UDP (INT spec v2.1 section 5.6), presence flagged by a DSCP bit.
const bit<6>  INT_DSCP_BIT      = 0x20;   // of the 6-bit DSCP: set while INT headers are present
const bit<4>  INT_TYPE_MD       = 1;      // shim Type: INT-MD
const bit<2>  INT_NPT_DSCP      = 0;      // shim NPT: INT flagged by DSCP (original DSCP in the shim)
const bit<4>  INT_VERSION       = 2;      // INT-MD header Ver
const bit<5>  INT_HOP_ML        = 8;      // Hop ML: words of metadata per hop
const bit<16> INT_INSTRUCTIONS  = 0xFC00; // bits 0-5: node id, L1 ports, latency, queue, ingress/egress tstamps
const bit<16> INT_DOMAIN_ID     = 0;      // Domain Specific ID: default domain only
const bit<8>  INT_MD_WORDS      = 3;      // shim length of an INT-MD header with no hops
const bit<8>  INT_HOP_WORDS     = 8;      // shim length added per hop (= Hop ML)
const bit<16> INT_HEADERS_BYTES = 16;     // shim (4) + INT-MD header (12), added by the source
const bit<16> INT_HOP_BYTES     = 32;     // one hop of metadata
#define MAX_INT_HOPS 6                    // hop stack depth: more than the longest fat-tree path
const bit<16> INT_DEFAULT_MTU   = 1500;   // int_config default: largest IP packet the egress link carries

// INT telemetry reports (Telemetry Report spec v2.0), cloned E2E at the sink.
const bit<32> INT_REPORT_SESSION = 500;   // clone session: one replica to the telemetry port
#define INT_REPORT_FIELD_LIST 2           // field list preserved into the report clone (int_report_metadata_t)
const bit<4>  REPORT_VERSION       = 2;   // Telemetry Report Group header Ver
const bit<6>  REPORT_HW_ID         = 0;   // hw_id: one hardware subsystem per switch
const bit<4>  REPORT_TYPE_INT      = 1;   // Individual Report RepType: INT
const bit<4>  REPORT_IN_TYPE_IPV4  = 4;   // InType: the inner packet starts with IPv4
const bit<4>  REPORT_IN_TYPE_IPV6  = 5;   // InType: the inner packet starts with IPv6
const bit<8>  REPORT_MAIN_WORDS    = 2;   // INT main contents (RepMdBits .. DSMdstatus) in words
const bit<16> REPORT_UDP_SPORT     = 0;   // report UDP source port (RFC 768: 0 = unused)
const bit<8>  REPORT_TTL           = 64;  // report IPv4 TTL
const bit<3>  IPV4_FLAGS_DF        = 2;   // Don't Fragment (reports carry IPv4 id 0)
const bit<32> REPORT_OUTER_BYTES   = 62;  // Ethernet 14 + IPv4 20 + UDP 8 + group 8 + individual 4 + main 8
const bit<32> REPORT_PAYLOAD_WORDS = 16;  // at most this many words of the inner payload (after the INT stack)

// In-network aggregation (SwitchML's protocol, ATP's jobs; include/control/aggregation.p4).
// Aggregation packets (frames) are UDP to AGG_UDP_PORT (0xBEE0, SwitchML's port) with an agg_h
// header and agg_h.frame_values signed 32-bit values in blocks of AGG_BLOCK_VALUES (agg_block_h):
// 1 to AGG_MAX_BLOCKS blocks, the job's choice (the agg_jobs entry's frame_values). One block is
// SwitchML's packet: 314 bytes on the wire, headers 18% of it; five make 1338 bytes, headers 4.3%,
// and a fifth of the packets (BMv2 and softswitch cost mostly per packet; both do one register
// read and write per value). A frame of B blocks uses B consecutive slots of the pool.
const bit<16> AGG_UDP_PORT     = 0xBEE0;
#define AGG_BLOCK_VALUES          64      // values per block (agg_block_h has exactly this many fields)
#define AGG_MAX_BLOCKS            5       // the largest frame: 320 values, 1324 bytes of IPv4 (MTU 1500)
const bit<8>  AGG_BLOCK_SHIFT  = 6;       // log2(AGG_BLOCK_VALUES): blocks = frame_values >> 6; cell = set << 6 | i
const bit<16> AGG_UDP_BYTES    = 24;      // UDP header 8 + agg_h 16: a frame of B blocks has udp.len 24 + B * 256
const bit<16> AGG_BLOCK_BYTES  = 256;     // AGG_BLOCK_VALUES * 4
const bit<32> AGG_POOL_SLOTS   = 1024;    // slots of all jobs together, one block each; a job owns [base, base + count)
const bit<32> AGG_SETS         = 2048;    // AGG_POOL_SLOTS * 2 (SwitchML's two shadow sets per slot)
const bit<32> AGG_CELLS        = 131072;  // AGG_SETS * AGG_BLOCK_VALUES accumulators
const bit<32> AGG_NEXT_BLOCK_CELLS = 128; // 2 * AGG_BLOCK_VALUES: from a block's cells to the next pool slot's, same set
const bit<8>  AGG_MAX_CHILDREN = 32;      // width of the contributor bitmap
const bit<8>  AGG_TYPE_CONTRIB = 0;       // a worker's values, or a switch's partial sum for its parent
const bit<8>  AGG_TYPE_RESULT  = 1;       // the sums, on their way down to the workers
const bit<8>  AGG_FLAG_OVERFLOW = 0x01;   // agg_h.flags: some sum saturated at INT32_MAX / INT32_MIN
const bit<8>  AGG_STATE_DONE    = 0x80;   // agg_flags register only: the set holds the job's final sums
const bit<2>  AGG_OP_READ  = 0;    // every value: packet := accumulator (answers, re-sent partials)
const bit<2>  AGG_OP_WRITE = 1;    // accumulator := packet (a new round, a result from the parent)
const bit<2>  AGG_OP_ADD   = 2;    // accumulator := packet := accumulator + packet, saturating
const bit<2>  AGG_OP_NONE  = 3;    // the values are not touched
const bit<32> AGG_INT32_MAX    = 0x7FFFFFFF;
const bit<32> AGG_INT32_MIN    = 0x80000000;
// agg_ops: what a tree switch did with each aggregation packet (counter indices).
const bit<32> AGG_OUTCOME_CONSUMED      = 0;  // a contribution added, the set not complete yet
const bit<32> AGG_OUTCOME_COMPLETED     = 1;  // root: last contribution, result multicast down
const bit<32> AGG_OUTCOME_PARTIAL_UP    = 2;  // non-root: last contribution, partial sum sent up
const bit<32> AGG_OUTCOME_RESULT_DOWN   = 3;  // non-root: result from the parent stored and passed down
const bit<32> AGG_OUTCOME_DUP_ANSWERED  = 4;  // retransmission answered from the stored result
const bit<32> AGG_OUTCOME_DUP_RESENT_UP = 5;  // retransmission: the partial sent up again
const bit<32> AGG_OUTCOME_DUP_DROPPED   = 6;  // retransmission of a contribution still being added
const bit<32> AGG_OUTCOME_REFUSED       = 7;  // not the job's frame size, bad slot, set or child, stale result, result at a root
const bit<32> AGG_OUTCOMES              = 8;
#define AGG_JOBS_TABLE_SIZE        256
#define AGG_RESULT_DST_TABLE_SIZE  512    // one entry per worker-facing port
#define LOSS_CONFIG_TABLE_SIZE     512    // one entry per egress port
#define FLOW_SAMPLING_TABLE_SIZE   512    // one entry per host-facing ingress port

// Load balancing (include/control/load_balance.p4).
const bit<2>  LB_MODE_ECMP    = 0;
const bit<2>  LB_MODE_SPRAY   = 1;
const bit<2>  LB_MODE_FLOWLET = 2;
const bit<32> FLOWLET_SLOTS   = 4096;          // flowlet state entries (a hash of the 5-tuple)
const bit<32> FLOWLET_ID_SCRAMBLE = 0x85EBCA6B; // odd: consecutive flowlet ids -> far-apart entropies
#define TE_OVERRIDE_TABLE_SIZE     4096

// Port liveness and failover (include/control/failover.p4).
#define PORT_STATUS_TABLE_SIZE     512    // one entry per dead port
#define FAILOVER_TABLE_SIZE        4096   // one entry per (next id, member port)
#define HEARTBEAT_WATCH_TABLE_SIZE 512    // one entry per watched fabric port
const bit<32> PORT_FAILOVER_SIZE = 512;   // indexed by 9-bit port numbers

// Table and counter sizes.
const bit<32> PORT_COUNTER_SIZE  = 512;   // indexed by 9-bit port numbers
#define MY_STATION_TABLE_SIZE  64
#define ARP_REPLY_TABLE_SIZE   1024
#define NDP_REPLY_TABLE_SIZE   1024
#define ROUTING_V4_TABLE_SIZE  16384
#define ROUTING_V6_TABLE_SIZE  16384
#define NEXT_HASHED_TABLE_SIZE 1024
#define ACL_TABLE_SIZE         1024
const bit<32> ECMP_SELECTOR_SIZE  = 1024; // members of all ECMP groups together
const bit<32> ECMP_SELECTOR_WIDTH = 16;   // bits of the selector hash
const bit<32> ECMP_SEED_SCRAMBLE  = 0x9E3779B1;  // odd (2^32 / golden ratio): hash seed -> ECMP multiplier
#define ECN_CONFIG_TABLE_SIZE      512    // one entry per egress port
#define ECN_CLASS_CONFIG_TABLE_SIZE 4096  // one entry per (egress port, traffic class)
#define TRAFFIC_CLASS_TABLE_SIZE   64     // one entry per DSCP
#define INT_WATCHLIST_TABLE_SIZE   1024
#define INT_SINK_PORTS_TABLE_SIZE  512    // one entry per egress port

// The do-nothing action shared by all tables (P4Info name "nop").
action nop() { }

#endif  // __DEFINE__
