"""Run a packet scenario on a P4 target and record what leaves which port.

A scenario is a compiled P4 program, the control-plane writes that configure it, and a list
of packets sent one at a time on given ports. Running it on a target (softswitch or BMv2)
yields, for every packet sent, the frames that came out and on which port (packet-ins
included, as port ``CPU_PORT`` carrying the P4Runtime metadata bytes first). Between packets
a scenario may run a control-plane `Step` (read a counter, change an entry); what the step
returns is recorded as its output on port ``CONTROL``. The same scenario run on both targets
must give the same result: that is the differential test.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller.p4info import P4Info
from controller.switch import SwitchConnection
from emulation.bmv2_cli import Bmv2CliError, find_cli, run_cli
from emulation.testbed import CONNECT_TIMEOUT_S, Testbed, free_tcp_port

REPO = Path(__file__).resolve().parents[2]
CPU_PORT = 255
CONTROL = -1        # the "port" of what a control-plane step returns
COUNT_WAIT_S = 10.0     # how long a send with a count waits for its frames at most


@dataclass
class Send:
    """A frame sent on a host port, or (port None) a P4Runtime packet-out."""

    port: int | None
    frame: bytes
    metadata: dict[str, int] = field(default_factory=dict)   # packet-out metadata by name
    expect_nothing: bool = False     # the packet is expected to vanish: wait less for it
    repeat: int = 1                  # sent this many times back to back (a burst)
    after: tuple[tuple[int, bytes], ...] = ()   # (host port, frame) sent right after the burst
    # frames the send makes, where a rated queue spreads them out: collected until that many came
    # (a busy machine's pause between two must not end the collection), then a quiet while more
    count: int | None = None


@dataclass
class Setup:
    """What a scenario's setup function (and its steps) get: the P4Info helper and a live session."""

    p4info: P4Info
    conn: SwitchConnection
    target: str = ""        # "softswitch" or "bmv2"
    runtime_addr: str = ""  # softswitch's --runtime-addr (softswitch-ctl)
    thrift_port: int = 0    # BMv2's Thrift port (simple_switch_CLI)

    def insert(self, *entities) -> None:
        self.conn.insert([_entity(e) for e in entities])

    def modify(self, *entities) -> None:
        self.conn.modify([_entity(e) for e in entities])

    def delete(self, *entities) -> None:
        self.conn.delete([_entity(e) for e in entities])

    def read(self, *entities) -> list[p4runtime_pb2.Entity]:
        return list(self.conn.read([_entity(e) for e in entities]))

    def switch_cli(self, *commands: str) -> str:
        """simple_switch_CLI commands (set_queue_rate, set_queue_depth) on either target:
        BMv2 through simple_switch_CLI, softswitch through softswitch-ctl."""
        if self.target == "bmv2":
            return run_cli(self.thrift_port, commands)     # with the project's Python (emulation.bmv2_cli)
        ctl = str(Path(sys.executable).parent / "softswitch-ctl")
        out = []
        for c in commands:
            res = subprocess.run([ctl, "--addr", self.runtime_addr, *c.split()], capture_output=True, text=True,
                                 timeout=30)
            if res.returncode != 0:
                raise RuntimeError(f"softswitch-ctl {c}: {res.stdout}{res.stderr}")
            out.append(res.stdout)
        return "".join(out)

    def bmv2_thrift(self, *calls: str) -> str:
        """Run calls on the Thrift client (``c``, bm_runtime's Standard.Client) of the BMv2,
        for what PI does not offer over P4Runtime (value sets, registers), e.g.
        ``s.bmv2_thrift("print(c.bm_register_read(0, 'MyIngress.reg', 3))")``; returns what
        they print.

        The calls run in the interpreter and with the module path the project runs
        simple_switch_CLI with (`emulation.bmv2_cli`: the venv's Python, BMv2's directory for
        bm_runtime); the CLI itself cannot be used for value sets: its pvs_add sizes
        values as ``(bitwidth + 7) / 8`` bytes, a float under Python 3, sends a byte too many
        and makes BMv2 abort."""
        python, paths = bmv2_thrift_python()
        code = "\n".join([f"import sys; sys.path[:0] = {paths!r}",
                          "from bmpy_utils import thrift_connect_standard",
                          f"c = thrift_connect_standard('127.0.0.1', {self.thrift_port})", *calls])
        res = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=30)
        if res.returncode != 0:
            raise RuntimeError(f"BMv2 Thrift calls {calls}: {res.stdout}{res.stderr}")
        return res.stdout


def bmv2_thrift_python() -> tuple[str, list[str]]:
    """(interpreter, module path) for BMv2 Thrift calls: the ones the project runs
    simple_switch_CLI with; skips the test, saying why, where they cannot work."""
    try:
        cli = find_cli()
    except Bmv2CliError as err:
        import pytest
        pytest.skip(f"BMv2's Thrift client cannot run: {err}")
    if cli.python is None:
        import pytest
        pytest.skip(f"BMv2's Thrift client cannot run: {cli.path} is not a Python script")
    return cli.python, cli.module_path


@dataclass
class Step:
    """A control-plane step between packets; what ``run`` returns is its recorded output."""

    run: Callable[[Setup], bytes]


@dataclass
class Scenario:
    name: str
    program: str                             # a file stem under tests/p4/build, or "fabric"
    packets: list[Send | Step]
    setup: Callable[[Setup], None] = lambda s: None
    ports: int = 4
    extra_ports: tuple[int, ...] = ()        # more ports by number (e.g. the heartbeat generator's 254)
    # Bytes that legitimately differ between runs (timestamps): a function that blanks them
    # for the comparison of targets (`expect` sees them as they were, to check them).
    normalise: Callable[[int, bytes], bytes] | None = None
    timeout: float = 1.0
    # Explicit expectations, checked on softswitch's outputs (assertions inside).
    expect: Callable[["Outputs"], None] | None = None
    # Why BMv2 cannot run it (None: it can, and must give what softswitch gives).
    not_bmv2: str | None = None


Outputs = list[list[tuple[int, bytes]]]     # per packet sent: sorted (port, frame)


def program_files(program: str) -> tuple[Path, Path]:
    d = REPO / ("p4src/build" if program == "fabric" else "tests/p4/build")
    return d / f"{program}.json", d / f"{program}.p4info.txtpb"


def load_p4info(path: Path) -> P4Info:
    return P4Info(text_format.Parse(path.read_text(), p4info_pb2.P4Info()))


# target -> (kind, letter for interface names, extra arguments): softswitch's packet paths, the
# generated Python (the reference), the compiled one (built beforehand: build_compiled) and the
# native one (its library built at the push, cached), this one on each port I/O: its ports'
# AF_PACKET sockets and AF_XDP sockets (the Python paths read AF_PACKET sockets; --native off,
# which --native auto, the default, is not)
TARGETS = {"softswitch": ("softswitch", "s", ("--compiled", "off", "--native", "off")),
           "softswitch-compiled": ("softswitch", "c", ("--compiled", "now", "--native", "off")),
           "softswitch-native": ("softswitch", "n", ("--compiled", "off", "--native", "on", "--port-io", "packet")),
           "softswitch-native-af_xdp": ("softswitch", "x", ("--compiled", "off", "--native", "on",
                                                            "--port-io", "af_xdp")),
           "bmv2": ("bmv2", "b", ())}
NATIVE_TARGETS = {"packet": "softswitch-native", "af_xdp": "softswitch-native-af_xdp"}   # by port I/O


def build_compiled(program: str) -> None:
    """Build ``program``'s compiled packet path into softswitch's cache (a P4Runtime pipeline
    push with ``--compiled now`` then finds it instead of building it within its deadline)."""
    from softswitch.pipeline.compiled import PathCompiler
    from softswitch.pipeline.program import Program
    json_path, _ = program_files(program)
    PathCompiler().build(Program(json_path.read_bytes()))


def run(target: str, sc: Scenario) -> Outputs:
    json_path, p4info_path = program_files(sc.program)
    info = load_p4info(p4info_path)
    kind, letter, args = TARGETS[target]
    prefix = f"d{os.getpid() % 1000}{letter}"
    with Testbed(nports=sc.ports, prefix=prefix) as tb:
        for number in sc.extra_ports:
            tb.add_port(number)
        runtime_addr = f"127.0.0.1:{free_tcp_port()}" if kind == "softswitch" else ""
        thrift_port = free_tcp_port() if kind == "bmv2" else 0   # test runs may share the machine
        if runtime_addr:
            args += ("--runtime-addr", runtime_addr)
        t = tb.start_target(kind, device_id=1, cpu_port=CPU_PORT, thrift_port=thrift_port or None,
                            extra_args=args)
        conn = SwitchConnection(f"{target}:{sc.name}", t.grpc_addr, device_id=1)
        try:
            conn.connect(timeout=CONNECT_TIMEOUT_S)
            conn.set_pipeline(info, json_path.read_bytes())
            setup = Setup(info, conn, kind, runtime_addr, thrift_port)
            sc.setup(setup)
            outputs: Outputs = []
            for pkt in sc.packets:
                if isinstance(pkt, Step):
                    outputs.append([(CONTROL, pkt.run(setup))])
                    continue
                tb.drain()
                while conn.packet_in(timeout=0) is not None:
                    pass
                for _ in range(pkt.repeat):
                    if pkt.port is None:
                        conn.packet_out(info.packet_out(pkt.frame, **pkt.metadata))
                    else:
                        tb.ports[pkt.port].send(pkt.frame)
                for port, frame in pkt.after:
                    tb.ports[port].send(frame)
                got = _collect(tb, conn, info, 0.3 if pkt.expect_nothing else sc.timeout, count=pkt.count)
                outputs.append(sorted(got))
            if runtime_addr:
                _check_no_packet_errors(target, sc, runtime_addr, t.log_path)
            return outputs
        finally:
            conn.close()


def _check_no_packet_errors(target: str, sc: Scenario, runtime_addr: str, log_path: Path) -> None:
    """A packet that made the program fail is dropped: an "expect nothing" scenario would pass
    on it. softswitch counts such packets by what was raised; none may have moved."""
    from softswitch.ctl import packet_errors
    errors = packet_errors(runtime_addr)
    assert not errors, (f"{sc.name} on {target}: packets made the program fail ({errors}); "
                        f"see {log_path}")


def _collect(tb: Testbed, conn: SwitchConnection, info: P4Info, timeout: float,
             quiet: float = 0.15, count: int | None = None) -> list[tuple[int, bytes]]:
    """Frames on the host ports and packet-ins, until ``quiet`` seconds pass without any once
    something arrived (and, given a ``count``, that many did), or ``timeout`` seconds without
    anything (given a ``count``, COUNT_WAIT_S seconds at least from the start: then a frame is
    missing and the comparison names it)."""
    got: list[tuple[int, bytes]] = []
    start = time.monotonic()
    deadline = start + timeout
    last = None
    while True:
        new = tb.collect(timeout=0.02, quiet=0.02)
        while (pin := conn.packet_in(timeout=0)) is not None:
            new.append((CPU_PORT, _packet_in_bytes(info, pin)))
        now = time.monotonic()
        if new:
            got += new
            last = now
        if count is not None:
            if (len(got) >= count and now - last >= quiet) or now >= start + max(timeout, COUNT_WAIT_S):
                return got
        elif (last is not None and now - last >= quiet) or (last is None and now >= deadline):
            return got




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
             p4runtime_pb2.ValueSetEntry: "value_set_entry",
             p4runtime_pb2.DirectCounterEntry: "direct_counter_entry"}
    ent = p4runtime_pb2.Entity()
    getattr(ent, kinds[type(e)]).CopyFrom(e)
    return ent


def comparable(sc: Scenario, outputs: Outputs) -> Outputs:
    """Outputs as the targets must agree on them: the scenario's non-deterministic bytes
    blanked (packets only, not steps); for a burst (``repeat`` > 1) which frames came out,
    not how many (how many a queue drops in a burst depends on thread timing in BMv2)."""
    out = []
    for pkt, got in zip(sc.packets, outputs):
        if sc.normalise is not None:
            got = sorted((p, f if p == CONTROL else sc.normalise(p, f)) for p, f in got)
        if isinstance(pkt, Send) and pkt.repeat > 1:
            got = sorted(set(got))
        out.append(got)
    return out


def describe(outputs: Outputs) -> str:
    lines = []
    for i, got in enumerate(outputs):
        lines.append(f"packet {i}: " + (", ".join(f"port {p}: {f.hex()}" for p, f in got) or "nothing"))
    return "\n".join(lines)
