"""Run a packet scenario on a P4 target and record what leaves which port.

A scenario is a compiled P4 program, the control-plane writes that configure it, and a list
of packets sent one at a time on given ports. Running it on a target (softswitch or BMv2)
yields, for every packet sent, the frames that came out and on which port (packet-ins
included, as port ``CPU_PORT`` carrying the P4Runtime metadata bytes first). The same
scenario run on both targets must give the same result: that is the differential test.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller.p4info import P4Info
from controller.switch import SwitchConnection
from topologies.testbed import Testbed

REPO = Path(__file__).resolve().parents[2]
CPU_PORT = 255


@dataclass
class Send:
    """A frame sent on a host port, or (port None) a P4Runtime packet-out."""

    port: int | None
    frame: bytes
    metadata: dict[str, int] = field(default_factory=dict)   # packet-out metadata by name
    expect_nothing: bool = False     # the packet is expected to vanish: wait less for it


@dataclass
class Setup:
    """What a scenario's setup function gets: the P4Info helper and a live session."""

    p4info: P4Info
    conn: SwitchConnection

    def insert(self, *entities) -> None:
        self.conn.insert([_entity(e) for e in entities])

    def modify(self, *entities) -> None:
        self.conn.modify([_entity(e) for e in entities])


@dataclass
class Scenario:
    name: str
    program: str                             # a file stem under tests/p4/build, or "fabric"
    packets: list[Send]
    setup: Callable[[Setup], None] = lambda s: None
    ports: int = 4
    # Bytes that legitimately differ between runs (timestamps): a function that blanks them.
    normalise: Callable[[int, bytes], bytes] | None = None
    timeout: float = 1.0
    # Explicit expectations, checked on softswitch's outputs (assertions inside).
    expect: Callable[["Outputs"], None] | None = None


Outputs = list[list[tuple[int, bytes]]]     # per packet sent: sorted (port, frame)


def program_files(program: str) -> tuple[Path, Path]:
    d = REPO / ("p4src/build" if program == "fabric" else "tests/p4/build")
    return d / f"{program}.json", d / f"{program}.p4info.txtpb"


def load_p4info(path: Path) -> P4Info:
    return P4Info(text_format.Parse(path.read_text(), p4info_pb2.P4Info()))


def run(target: str, sc: Scenario) -> Outputs:
    json_path, p4info_path = program_files(sc.program)
    info = load_p4info(p4info_path)
    prefix = f"d{os.getpid() % 1000}{target[0]}"
    with Testbed(nports=sc.ports, prefix=prefix) as tb:
        t = tb.start_target(target, device_id=1, cpu_port=CPU_PORT)
        conn = SwitchConnection(f"{target}:{sc.name}", t.grpc_addr, device_id=1)
        try:
            conn.connect()
            conn.set_pipeline(info, json_path.read_bytes())
            sc.setup(Setup(info, conn))
            outputs: Outputs = []
            for pkt in sc.packets:
                tb.drain()
                while conn.packet_in(timeout=0) is not None:
                    pass
                if pkt.port is None:
                    conn.packet_out(info.packet_out(pkt.frame, **pkt.metadata))
                else:
                    tb.ports[pkt.port].send(pkt.frame)
                got = tb.collect(timeout=0.3 if pkt.expect_nothing else sc.timeout)
                while (pin := conn.packet_in(timeout=0.05)) is not None:
                    got.append((CPU_PORT, _packet_in_bytes(info, pin)))
                if sc.normalise:
                    got = [(p, sc.normalise(p, f)) for p, f in got]
                outputs.append(sorted(got))
            return outputs
        finally:
            conn.close()


def _packet_in_bytes(info: P4Info, pin: p4runtime_pb2.PacketIn) -> bytes:
    """A packet-in as bytes: its metadata values (id order, 4 bytes each), then the payload."""
    meta = b"".join(m.value.rjust(4, b"\0") for m in sorted(pin.metadata, key=lambda m: m.metadata_id))
    return meta + pin.payload


def _entity(e) -> p4runtime_pb2.Entity:
    if isinstance(e, p4runtime_pb2.Entity):
        return e
    kinds = {p4runtime_pb2.TableEntry: "table_entry", p4runtime_pb2.ActionProfileMember: "action_profile_member",
             p4runtime_pb2.ActionProfileGroup: "action_profile_group",
             p4runtime_pb2.PacketReplicationEngineEntry: "packet_replication_engine_entry",
             p4runtime_pb2.RegisterEntry: "register_entry", p4runtime_pb2.CounterEntry: "counter_entry",
             p4runtime_pb2.MeterEntry: "meter_entry", p4runtime_pb2.DirectMeterEntry: "direct_meter_entry",
             p4runtime_pb2.ValueSetEntry: "value_set_entry"}
    ent = p4runtime_pb2.Entity()
    getattr(ent, kinds[type(e)]).CopyFrom(e)
    return ent


def describe(outputs: Outputs) -> str:
    lines = []
    for i, got in enumerate(outputs):
        lines.append(f"packet {i}: " + (", ".join(f"port {p}: {f.hex()}" for p, f in got) or "nothing"))
    return "\n".join(lines)
