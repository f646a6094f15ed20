"""The fabric program's P4 names and constants, for the controller. GENERATED: do not edit.

Made by ``make p4names`` (``python -m aifabric.p4build --names``; ``make p4`` runs it too) from
p4src/build/fabric.p4info.txtpb (tables, actions, parameters, match fields, counters, registers, action
profiles, packet metadata) and p4src/include/define.p4 (integer constants). A P4 object renamed
or removed takes its name out of this module, so the controller code that used it fails
when it is imported; tests/controller/test_p4names.py fails while this file is stale.
"""


class Table:
    """P4Info tables."""

    FILTERING_MY_STATION = 'FabricIngress.filtering.my_station'
    ARP_NDP_ARP_REPLY = 'FabricIngress.arp_ndp.arp_reply'
    ARP_NDP_NDP_REPLY = 'FabricIngress.arp_ndp.ndp_reply'
    FORWARDING_ROUTING_V4 = 'FabricIngress.forwarding.routing_v4'
    FORWARDING_ROUTING_V6 = 'FabricIngress.forwarding.routing_v6'
    NEXT_HASH_CONFIG = 'FabricIngress.next.hash_config'
    NEXT_HASHED = 'FabricIngress.next.hashed'
    ACL_ACL = 'FabricIngress.acl.acl'
    INT_WATCHLIST_WATCHLIST = 'FabricIngress.int_watchlist.watchlist'
    AGGREGATION_AGG_JOBS = 'FabricIngress.aggregation.agg_jobs'
    LOAD_BALANCE_LB_MODE = 'FabricIngress.load_balance.lb_mode'
    TE_OVERRIDE_TE_OVERRIDE = 'FabricIngress.te_override.te_override'
    PORT_FAILOVER_HEARTBEAT_WATCH = 'FabricIngress.port_failover.heartbeat_watch'
    PORT_FAILOVER_PORT_STATUS = 'FabricIngress.port_failover.port_status'
    PORT_FAILOVER_FAILOVER = 'FabricIngress.port_failover.failover'
    FLOW_SAMPLING_FLOW_SAMPLING = 'FabricIngress.flow_sampling.flow_sampling'
    TRAFFIC_CLASS_DSCP_CLASS = 'FabricIngress.traffic_class.dscp_class'
    ECN_ECN_CONFIG = 'FabricEgress.ecn.ecn_config'
    ECN_ECN_CLASS_CONFIG = 'FabricEgress.ecn.ecn_class_config'
    INT_EGRESS_INT_CONFIG = 'FabricEgress.int_egress.int_config'
    INT_EGRESS_SINK_PORTS = 'FabricEgress.int_egress.sink_ports'
    INT_EGRESS_REPORT_CONFIG = 'FabricEgress.int_egress.report_config'
    AGGREGATION_AGG_RESULT_DST = 'FabricEgress.aggregation.agg_result_dst'
    LOSS_LOSS_CONFIG = 'FabricEgress.loss.loss_config'


class Action:
    """P4Info actions."""

    NOP = 'nop'
    FILTERING_SET_ROUTABLE = 'FabricIngress.filtering.set_routable'
    ARP_NDP_REPLY_ARP = 'FabricIngress.arp_ndp.reply_arp'
    ARP_NDP_REPLY_NDP = 'FabricIngress.arp_ndp.reply_ndp'
    FORWARDING_SET_NEXT_ID = 'FabricIngress.forwarding.set_next_id'
    FORWARDING_DROP = 'FabricIngress.forwarding.drop'
    NEXT_SET_HASH_SEED = 'FabricIngress.next.set_hash_seed'
    NEXT_ROUTE = 'FabricIngress.next.route'
    ACL_PUNT_TO_CPU = 'FabricIngress.acl.punt_to_cpu'
    ACL_COPY_TO_CPU = 'FabricIngress.acl.copy_to_cpu'
    ACL_DROP = 'FabricIngress.acl.drop'
    INT_WATCHLIST_MARK_SOURCE = 'FabricIngress.int_watchlist.mark_source'
    AGGREGATION_AGGREGATE_ROOT = 'FabricIngress.aggregation.aggregate_root'
    AGGREGATION_AGGREGATE_CHILD = 'FabricIngress.aggregation.aggregate_child'
    AGGREGATION_COMBINE_BLOCK = 'FabricIngress.aggregation.combine_block'
    AGGREGATION_REFUSE = 'FabricIngress.aggregation.refuse'
    AGGREGATION_SEND_UP = 'FabricIngress.aggregation.send_up'
    LOAD_BALANCE_ECMP = 'FabricIngress.load_balance.ecmp'
    LOAD_BALANCE_SPRAY = 'FabricIngress.load_balance.spray'
    LOAD_BALANCE_FLOWLET = 'FabricIngress.load_balance.flowlet'
    TE_OVERRIDE_PIN = 'FabricIngress.te_override.pin'
    PORT_FAILOVER_PORT_DOWN = 'FabricIngress.port_failover.port_down'
    PORT_FAILOVER_WATCH = 'FabricIngress.port_failover.watch'
    PORT_FAILOVER_REROUTE = 'FabricIngress.port_failover.reroute'
    FLOW_SAMPLING_SAMPLE = 'FabricIngress.flow_sampling.sample'
    TRAFFIC_CLASS_SET_CLASS = 'FabricIngress.traffic_class.set_class'
    ECN_SET_THRESHOLDS = 'FabricEgress.ecn.set_thresholds'
    INT_EGRESS_CONFIGURE = 'FabricEgress.int_egress.configure'
    INT_EGRESS_MARK_SINK = 'FabricEgress.int_egress.mark_sink'
    INT_EGRESS_CONFIGURE_REPORT = 'FabricEgress.int_egress.configure_report'
    AGGREGATION_TO_WORKER = 'FabricEgress.aggregation.to_worker'
    LOSS_SET_LOSS = 'FabricEgress.loss.set_loss'


class Counter:
    """P4Info counters."""

    FILTERING_INGRESS_PORT_COUNTER = 'FabricIngress.filtering.ingress_port_counter'
    AGGREGATION_AGG_OPS = 'FabricIngress.aggregation.agg_ops'
    PORT_FAILOVER_FAILED_OVER = 'FabricIngress.port_failover.failed_over'
    FLOW_SAMPLING_FLOW_SAMPLES = 'FabricIngress.flow_sampling.flow_samples'
    ECN_ECN_MARKED = 'FabricEgress.ecn.ecn_marked'
    LOSS_LOSS_DROPPED = 'FabricEgress.loss.loss_dropped'
    EGRESS_PORT_COUNTER = 'FabricEgress.egress_port_counter'


class DirectCounter:
    """P4Info direct_counters."""

    ACL_ACL_COUNTER = 'FabricIngress.acl.acl_counter'
    TE_OVERRIDE_TE_PINNED = 'FabricIngress.te_override.te_pinned'


class Register:
    """P4Info registers."""

    PORT_LAST_HEARD = 'port_last_heard'
    LATEST_HEARTBEAT = 'latest_heartbeat'
    AGGREGATION_AGG_BITMAP = 'FabricIngress.aggregation.agg_bitmap'
    AGGREGATION_AGG_COUNT = 'FabricIngress.aggregation.agg_count'
    AGGREGATION_AGG_EXPONENT = 'FabricIngress.aggregation.agg_exponent'
    AGGREGATION_AGG_FLAGS = 'FabricIngress.aggregation.agg_flags'
    AGGREGATION_AGG_SEQ = 'FabricIngress.aggregation.agg_seq'
    AGGREGATION_AGG_OWNER = 'FabricIngress.aggregation.agg_owner'
    AGGREGATION_AGG_VALUES = 'FabricIngress.aggregation.agg_values'
    LOAD_BALANCE_FLOWLET_LAST_SEEN = 'FabricIngress.load_balance.flowlet_last_seen'
    LOAD_BALANCE_FLOWLET_ID = 'FabricIngress.load_balance.flowlet_id'
    INT_EGRESS_REPORT_SEQ = 'FabricEgress.int_egress.report_seq'


class ActionProfile:
    """P4Info action_profiles."""

    NEXT_ECMP_SELECTOR = 'FabricIngress.next.ecmp_selector'


class PacketOut:
    """Fields of the packet_out header (@controller_header)."""

    EGRESS_PORT = 'egress_port'
    PAD = '_pad'


class PacketIn:
    """Fields of the packet_in header (@controller_header)."""

    INGRESS_PORT = 'ingress_port'
    PAD = '_pad'


# Match fields of each table, in P4Info order.
MATCH_FIELDS: dict[str, tuple[str, ...]] = {
    Table.FILTERING_MY_STATION: ('eth_dst',),
    Table.ARP_NDP_ARP_REPLY: ('target_ipv4',),
    Table.ARP_NDP_NDP_REPLY: ('target_ipv6',),
    Table.FORWARDING_ROUTING_V4: ('ipv4_dst',),
    Table.FORWARDING_ROUTING_V6: ('ipv6_dst',),
    Table.NEXT_HASH_CONFIG: (),
    Table.NEXT_HASHED: ('next_id',),
    Table.ACL_ACL: ('ig_port', 'eth_src', 'eth_dst', 'eth_type', 'ip_proto', 'l4_sport', 'l4_dport', 'icmp_type'),
    Table.INT_WATCHLIST_WATCHLIST: ('ip_src', 'ip_dst', 'ip_proto', 'l4_sport', 'l4_dport'),
    Table.AGGREGATION_AGG_JOBS: ('job_id',),
    Table.LOAD_BALANCE_LB_MODE: (),
    Table.TE_OVERRIDE_TE_OVERRIDE: ('ip_src', 'ip_dst', 'ip_proto', 'l4_sport', 'l4_dport'),
    Table.PORT_FAILOVER_HEARTBEAT_WATCH: ('port',),
    Table.PORT_FAILOVER_PORT_STATUS: ('port',),
    Table.PORT_FAILOVER_FAILOVER: ('next_id', 'port'),
    Table.FLOW_SAMPLING_FLOW_SAMPLING: ('ig_port',),
    Table.TRAFFIC_CLASS_DSCP_CLASS: ('dscp',),
    Table.ECN_ECN_CONFIG: ('egress_port',),
    Table.ECN_ECN_CLASS_CONFIG: ('egress_port', 'priority'),
    Table.INT_EGRESS_INT_CONFIG: (),
    Table.INT_EGRESS_SINK_PORTS: ('egress_port',),
    Table.INT_EGRESS_REPORT_CONFIG: (),
    Table.AGGREGATION_AGG_RESULT_DST: ('egress_port',),
    Table.LOSS_LOSS_CONFIG: ('egress_port',),
}

# Parameters of each action, in P4Info order.
ACTION_PARAMS: dict[str, tuple[str, ...]] = {
    Action.NOP: (),
    Action.FILTERING_SET_ROUTABLE: (),
    Action.ARP_NDP_REPLY_ARP: ('mac',),
    Action.ARP_NDP_REPLY_NDP: ('mac',),
    Action.FORWARDING_SET_NEXT_ID: ('next_id',),
    Action.FORWARDING_DROP: (),
    Action.NEXT_SET_HASH_SEED: ('seed',),
    Action.NEXT_ROUTE: ('port', 'smac', 'dmac'),
    Action.ACL_PUNT_TO_CPU: (),
    Action.ACL_COPY_TO_CPU: (),
    Action.ACL_DROP: (),
    Action.INT_WATCHLIST_MARK_SOURCE: ('max_hop',),
    Action.AGGREGATION_AGGREGATE_ROOT: ('epoch', 'slot_base', 'slot_count', 'frame_values', 'fan_in', 'group'),
    Action.AGGREGATION_AGGREGATE_CHILD: ('epoch', 'slot_base', 'slot_count', 'frame_values', 'fan_in', 'group', 'parent_port', 'index_at_parent', 'own_mac', 'parent_mac'),
    Action.AGGREGATION_COMBINE_BLOCK: (),
    Action.AGGREGATION_REFUSE: (),
    Action.AGGREGATION_SEND_UP: (),
    Action.LOAD_BALANCE_ECMP: (),
    Action.LOAD_BALANCE_SPRAY: (),
    Action.LOAD_BALANCE_FLOWLET: ('gap_us',),
    Action.TE_OVERRIDE_PIN: ('port', 'smac', 'dmac'),
    Action.PORT_FAILOVER_PORT_DOWN: (),
    Action.PORT_FAILOVER_WATCH: ('timeout_us',),
    Action.PORT_FAILOVER_REROUTE: ('port', 'smac', 'dmac'),
    Action.FLOW_SAMPLING_SAMPLE: ('probability',),
    Action.TRAFFIC_CLASS_SET_CLASS: ('tc',),
    Action.ECN_SET_THRESHOLDS: ('kmin', 'kmax', 'pmax'),
    Action.INT_EGRESS_CONFIGURE: ('switch_id', 'mtu'),
    Action.INT_EGRESS_MARK_SINK: (),
    Action.INT_EGRESS_CONFIGURE_REPORT: ('src_mac', 'dst_mac', 'src_ip', 'dst_ip', 'dst_port'),
    Action.AGGREGATION_TO_WORKER: ('smac', 'dmac', 'ipv4'),
    Action.LOSS_SET_LOSS: ('probability',),
}

# Integer constants of p4src/include/define.p4.
CPU_PORT = 255
DROP_PORT = 511
HEARTBEAT_GEN_PORT = 254
PRIORITY_CONTROL = 7
PRIORITY_LINK_HEARTBEAT = 6
CPU_CLONE_SESSION_ID = 511
CPU_CLONE_FIELD_LIST = 1
ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_ARP = 0x0806
ETHERTYPE_IPV6 = 0x86dd
ETHERTYPE_HEARTBEAT = 0x88b5
ETHERTYPE_LINK_HEARTBEAT = 0x88b6
PROTO_ICMP = 1
PROTO_TCP = 6
PROTO_UDP = 17
PROTO_ICMPV6 = 58
IPV4_MIN_IHL = 5  # IPv4 without options; others are not routed
ETH_HEADER_BYTES = 14
IPV4_HEADER_BYTES = 20  # without options
IPV6_HEADER_BYTES = 40
TCP_HEADER_BYTES = 20  # the fixed part: INT goes before any option
UDP_HEADER_BYTES = 8
UDP_PORT_ROCEV2 = 4791
ARP_HTYPE_ETHERNET = 1
ARP_OPER_REQUEST = 1
ARP_OPER_REPLY = 2
ICMPV6_TYPE_NS = 135
ICMPV6_TYPE_NA = 136
NDP_OPT_SRC_LL_ADDR = 1
NDP_OPT_TGT_LL_ADDR = 2
NDP_NA_FLAGS = 0xE0000000  # Router, Solicited, Override
NDP_HOP_LIMIT = 255
NDP_NS_BASE_LEN = 24
NDP_NS_WITH_LL_LEN = 32
PKT_INSTANCE_TYPE_NORMAL = 0
PKT_INSTANCE_TYPE_INGRESS_CLONE = 1
PKT_INSTANCE_TYPE_EGRESS_CLONE = 2
PKT_INSTANCE_TYPE_REPLICATION = 5  # a multicast copy
ECN_NOT_ECT = 0
ECN_ECT1 = 1
ECN_ECT0 = 2
ECN_CE = 3
INT_DSCP_BIT = 0x20  # of the 6-bit DSCP: set while INT headers are present
INT_TYPE_MD = 1  # shim Type: INT-MD
INT_NPT_DSCP = 0  # shim NPT: INT flagged by DSCP (original DSCP in the shim)
INT_VERSION = 2  # INT-MD header Ver
INT_HOP_ML = 8  # Hop ML: words of metadata per hop
INT_INSTRUCTIONS = 0xFC00  # bits 0-5: node id, L1 ports, latency, queue, ingress/egress tstamps
INT_DOMAIN_ID = 0  # Domain Specific ID: default domain only
INT_MD_WORDS = 3  # shim length of an INT-MD header with no hops
INT_HOP_WORDS = 8  # shim length added per hop (= Hop ML)
INT_HEADERS_BYTES = 16  # shim (4) + INT-MD header (12), added by the source
INT_HOP_BYTES = 32  # one hop of metadata
MAX_INT_HOPS = 6  # hop stack depth: more than the longest fat-tree path
INT_DEFAULT_MTU = 1500  # int_config default: largest IP packet the egress link carries
INT_REPORT_SESSION = 500  # clone session: one replica to the telemetry port
INT_REPORT_FIELD_LIST = 2  # field list preserved into the report clone (int_report_metadata_t)
REPORT_VERSION = 2  # Telemetry Report Group header Ver
REPORT_HW_ID = 0  # hw_id: one hardware subsystem per switch
REPORT_TYPE_INT = 1  # Individual Report RepType: INT
REPORT_IN_TYPE_IPV4 = 4  # InType: the inner packet starts with IPv4
REPORT_IN_TYPE_IPV6 = 5  # InType: the inner packet starts with IPv6
REPORT_MAIN_WORDS = 2  # INT main contents (RepMdBits .. DSMdstatus) in words
REPORT_UDP_SPORT = 0  # report UDP source port (RFC 768: 0 = unused)
REPORT_TTL = 64  # report IPv4 TTL
IPV4_FLAGS_DF = 2  # Don't Fragment (reports carry IPv4 id 0)
REPORT_OUTER_BYTES = 62  # Ethernet 14 + IPv4 20 + UDP 8 + group 8 + individual 4 + main 8
REPORT_PAYLOAD_WORDS = 16  # at most this many words of the inner payload (after the INT stack)
AGG_UDP_PORT = 0xBEE0
AGG_BLOCK_VALUES = 64  # values per block (agg_block_h has exactly this many fields)
AGG_MAX_BLOCKS = 5  # the largest frame: 320 values, 1324 bytes of IPv4 (MTU 1500)
AGG_BLOCK_SHIFT = 6  # log2(AGG_BLOCK_VALUES): blocks = frame_values >> 6; cell = set << 6 | i
AGG_UDP_BYTES = 24  # UDP header 8 + agg_h 16: a frame of B blocks has udp.len 24 + B * 256
AGG_BLOCK_BYTES = 256  # AGG_BLOCK_VALUES * 4
AGG_POOL_SLOTS = 1024  # slots of all jobs together, one block each; a job owns [base, base + count)
AGG_SETS = 2048  # AGG_POOL_SLOTS * 2 (SwitchML's two shadow sets per slot)
AGG_CELLS = 131072  # AGG_SETS * AGG_BLOCK_VALUES accumulators
AGG_NEXT_BLOCK_CELLS = 128  # 2 * AGG_BLOCK_VALUES: from a block's cells to the next pool slot's, same set
AGG_MAX_CHILDREN = 32  # width of the contributor bitmap
AGG_TYPE_CONTRIB = 0  # a worker's values, or a switch's partial sum for its parent
AGG_TYPE_RESULT = 1  # the sums, on their way down to the workers
AGG_FLAG_OVERFLOW = 0x01  # agg_h.flags: some sum saturated at INT32_MAX / INT32_MIN
AGG_STATE_DONE = 0x80  # agg_flags register only: the set holds the job's final sums
AGG_OP_READ = 0  # every value: packet := accumulator (answers, re-sent partials)
AGG_OP_WRITE = 1  # accumulator := packet (a new round, a result from the parent)
AGG_OP_ADD = 2  # accumulator := packet := accumulator + packet, saturating
AGG_OP_NONE = 3  # the values are not touched
AGG_INT32_MAX = 0x7FFFFFFF
AGG_INT32_MIN = 0x80000000
AGG_OUTCOME_CONSUMED = 0  # a contribution added, the set not complete yet
AGG_OUTCOME_COMPLETED = 1  # root: last contribution, result multicast down
AGG_OUTCOME_PARTIAL_UP = 2  # non-root: last contribution, partial sum sent up
AGG_OUTCOME_RESULT_DOWN = 3  # non-root: result from the parent stored and passed down
AGG_OUTCOME_DUP_ANSWERED = 4  # retransmission answered from the stored result
AGG_OUTCOME_DUP_RESENT_UP = 5  # retransmission: the partial sent up again
AGG_OUTCOME_DUP_DROPPED = 6  # retransmission of a contribution still being added
AGG_OUTCOME_REFUSED = 7  # not the job's frame size, bad slot, set or child, stale result, result at a root
AGG_OUTCOMES = 8
AGG_JOBS_TABLE_SIZE = 256
AGG_RESULT_DST_TABLE_SIZE = 512  # one entry per worker-facing port
LOSS_CONFIG_TABLE_SIZE = 512  # one entry per egress port
FLOW_SAMPLING_TABLE_SIZE = 512  # one entry per host-facing ingress port
LB_MODE_ECMP = 0
LB_MODE_SPRAY = 1
LB_MODE_FLOWLET = 2
FLOWLET_SLOTS = 4096  # flowlet state entries (a hash of the 5-tuple)
FLOWLET_ID_SCRAMBLE = 0x85EBCA6B  # odd: consecutive flowlet ids -> far-apart entropies
TE_OVERRIDE_TABLE_SIZE = 4096
PORT_STATUS_TABLE_SIZE = 512  # one entry per dead port
FAILOVER_TABLE_SIZE = 4096  # one entry per (next id, member port)
HEARTBEAT_WATCH_TABLE_SIZE = 512  # one entry per watched fabric port
PORT_FAILOVER_SIZE = 512  # indexed by 9-bit port numbers
PORT_COUNTER_SIZE = 512  # indexed by 9-bit port numbers
MY_STATION_TABLE_SIZE = 64
ARP_REPLY_TABLE_SIZE = 1024
NDP_REPLY_TABLE_SIZE = 1024
ROUTING_V4_TABLE_SIZE = 16384
ROUTING_V6_TABLE_SIZE = 16384
NEXT_HASHED_TABLE_SIZE = 1024
ACL_TABLE_SIZE = 1024
ECMP_SELECTOR_SIZE = 1024  # members of all ECMP groups together
ECMP_SELECTOR_WIDTH = 16  # bits of the selector hash
ECMP_SEED_SCRAMBLE = 0x9E3779B1  # odd (2^32 / golden ratio): hash seed -> ECMP multiplier
ECN_CONFIG_TABLE_SIZE = 512  # one entry per egress port
ECN_CLASS_CONFIG_TABLE_SIZE = 4096  # one entry per (egress port, traffic class)
TRAFFIC_CLASS_TABLE_SIZE = 64  # one entry per DSCP
INT_WATCHLIST_TABLE_SIZE = 1024
INT_SINK_PORTS_TABLE_SIZE = 512  # one entry per egress port
