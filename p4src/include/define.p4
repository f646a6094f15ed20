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

// Clone session of copy_to_cpu; the controller configures it (P4Runtime
// CloneSessionEntry) with a single replica to CPU_PORT.
const bit<32> CPU_CLONE_SESSION_ID = 511;
// Field list preserved in clones to the CPU (see fabric_metadata_t.cpu_ig_port).
#define CPU_CLONE_FIELD_LIST 1

// Ether types.
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<16> ETHERTYPE_IPV6 = 0x86dd;

// IP protocol numbers / IPv6 next headers.
const bit<8> PROTO_ICMP   = 1;
const bit<8> PROTO_TCP    = 6;
const bit<8> PROTO_UDP    = 17;
const bit<8> PROTO_ICMPV6 = 58;

const bit<4> IPV4_MIN_IHL = 5;      // IPv4 without options; others are not routed

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

// The do-nothing action shared by all tables (P4Info name "nop").
action nop() { }

#endif  // __DEFINE__
