"""One pushed forwarding pipeline: the program, its P4Info map and the P4Runtime-only state.

A `Pipeline` is built (and thereby verified) from a ForwardingPipelineConfig; its `Program`
carries the tables, externs and their state. What P4Runtime must return on reads but the data
plane does not keep (controller metadata of default entries, a group's requested max_size, the
members of value sets as written, the port encoding of PRE replicas) lives here too.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from ..pipeline.errors import ProgramError
from ..pipeline.program import Program
from ..runtime.pre import ReplicationEngine
from . import wire
from .errors import invalid
from .p4info_map import PipelineMap, build_map


@dataclass
class ReplicaRecord:
    """A PRE replica as the client wrote it (``port_bytes`` set when given as ``port``)."""

    port: int
    instance: int
    port_bytes: bytes | None = None


@dataclass
class McGroupRecord:
    replicas: list[ReplicaRecord]
    metadata: bytes = b""


@dataclass
class CloneSessionRecord:
    replicas: list[ReplicaRecord]
    class_of_service: int = 0
    packet_length_bytes: int = 0


@dataclass
class PreState:
    """The replication engine of the data plane plus what reads must echo back."""

    engine: ReplicationEngine = field(default_factory=ReplicationEngine)
    groups: dict[int, McGroupRecord] = field(default_factory=dict)
    sessions: dict[int, CloneSessionRecord] = field(default_factory=dict)


@dataclass
class DefaultEntryMeta:
    controller_metadata: int = 0
    metadata: bytes = b""


class Pipeline:
    def __init__(self, p4info: p4info_pb2.P4Info, device_config: bytes, cookie: int | None,
                 pre: PreState | None = None):
        self.p4info = p4info
        self.device_config = device_config              # as the client sent it (Get echoes it)
        self.json = extract_bmv2_json(device_config)
        try:
            self.program = Program(self.json)
        except ProgramError as e:
            raise invalid(f"the device config is not a BMv2 JSON program softswitch can run: {e}") from None
        self.map: PipelineMap = build_map(p4info, self.program)
        self.cookie = cookie
        self.pre = pre if pre is not None else PreState()
        self.default_meta: dict[int, DefaultEntryMeta] = {}
        self.group_max_size: dict[tuple[int, int], int] = {}        # (profile id, group id) -> as requested
        self.value_set_members: dict[int, list[p4runtime_pb2.ValueSetMember]] = {}
        self.digest_configs: dict[int, p4runtime_pb2.DigestEntry] = {}

    def config_message(self, with_p4info: bool, with_device_config: bool) -> p4runtime_pb2.ForwardingPipelineConfig:
        cfg = p4runtime_pb2.ForwardingPipelineConfig()
        if with_p4info:
            cfg.p4info.CopyFrom(self.p4info)
        if with_device_config:
            cfg.p4_device_config = self.device_config
        if self.cookie is not None:
            cfg.cookie.cookie = self.cookie
        return cfg


def extract_bmv2_json(device_config: bytes) -> bytes:
    """The BMv2 JSON of a device config: the bytes themselves, or the ``device_data`` of a
    legacy ``p4.tmp.P4DeviceConfig`` message (what PI also accepts, and what the p4lang
    tutorials send)."""
    if not device_config:
        raise invalid("the ForwardingPipelineConfig has no p4_device_config (BMv2 JSON)")
    if device_config.lstrip()[:1] == b"{":
        return device_config
    data = _legacy_device_data(device_config)
    return data if data is not None else device_config


def _legacy_device_data(buf: bytes) -> bytes | None:
    """Field 3 (device_data) of a serialized P4DeviceConfig, or None if ``buf`` is not one."""
    found = None
    try:
        for f in wire.fields(buf):
            if f.number == 3 and f.wire_type == wire.LEN:
                found = buf[f.value:f.end]
    except ValueError:
        return None
    return found
