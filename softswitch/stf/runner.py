"""Run an STF test on a target and say whether it passed.

The statements run in file order: control-plane commands go to the target at once,
packets are sent on their ports, ``expect`` lines collect what each port must carry.
When the file ends the target finishes what is in flight and the frames each watched
port carried are compared with the expectations (expect.py). Counter and register checks
compare at the point they stand in the file. A command this runner does not carry out
(``mirroring_get``, the meter ones, ``counter_read``/``register_read`` which only print)
is listed by name in the result, never passed over in silence; a packet the target failed
to process (softswitch's error count) fails the test.
"""
from __future__ import annotations

import json
import operator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol

from .expect import Difference, Expected, compare
from .names import ProgramNames, ResolvedEntry
from .errors import StfError, Unsupported
from .statements import Statement, parse_file

OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
INFORMATIONAL = ("mirroring_get", "counter_read", "register_read", "meter_get_rates")
ETH_HEADER_LEN = 14
TARGET_GROUP = "softswitch.stf_targets"


class Target(Protocol):
    name: str

    def add(self, entry: ResolvedEntry) -> int: ...               # returns the entry's handle
    def set_default(self, table: str, action: str, data: tuple) -> None: ...
    def send(self, port: int, frame: bytes) -> None: ...
    def settle(self) -> None: ...                                  # what was sent has been processed
    def mirroring_add(self, session: int, port: int) -> None: ...
    def mirroring_add_mc(self, session: int, group: int) -> None: ...
    def mirroring_delete(self, session: int) -> None: ...
    def mc_mgrp_create(self, group: int) -> None: ...
    def mc_node_create(self, rid: int, ports: list[int]) -> int: ...
    def mc_node_update(self, handle: int, ports: list[int]) -> None: ...
    def mc_node_associate(self, group: int, handle: int) -> None: ...
    def counter(self, name: str, index: int) -> tuple[int, int]: ...
    def direct_counter(self, table: str, handle: int) -> tuple[int, int]: ...
    def counter_write(self, name: str, index: int, packets: int, nbytes: int) -> None: ...
    def register(self, name: str, index: int) -> int: ...
    def register_write(self, name: str, index: int, value: int) -> None: ...
    def register_reset(self, name: str) -> None: ...
    def clear_tables(self) -> None: ...
    def finish(self) -> dict[int, list[bytes]]: ...               # frames per port, in order
    def errors(self) -> list[str]: ...                             # packets the target failed on
    def close(self) -> None: ...


@dataclass
class StfResult:
    target: str
    passed: bool = False
    differences: list[Difference] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)     # checks that failed, errors, by name
    not_run: list[str] = field(default_factory=list)      # informational commands not carried out
    packets_sent: int = 0
    frames_out: dict[int, int] = field(default_factory=dict)
    outputs: dict[int, list[bytes]] = field(default_factory=dict)    # the frames per watched port

    @property
    def first_difference(self) -> Difference | None:
        return self.differences[0] if self.differences else None

    def summary(self) -> str:
        if self.passed:
            return f"{self.target}: passed ({self.packets_sent} packets)"
        lines = [f"{self.target}: FAILED"] + [f"  {f}" for f in self.failures]
        lines += [f"  {d}" for d in self.differences]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"target": self.target, "passed": self.passed, "failures": self.failures,
                "differences": [d.__dict__ for d in self.differences], "not_run": self.not_run,
                "packets_sent": self.packets_sent, "frames_out": self.frames_out}


def watched_ports(statements: list[Statement]) -> set[int]:
    """The ports a test sends or expects on: the ones given an interface, as p4c's runner."""
    return {s["port"] for s in statements if s.command in ("packet", "expect")}


def make_target(kind: str, json_path: Path, ports: set[int], senders: set[int], shortest: int) -> Target:
    if kind == "softswitch":
        from .softswitch_target import SoftswitchTarget
        return SoftswitchTarget(json_path, ports)
    if kind == "softswitch-native":
        from .native_target import NativeTarget
        return NativeTarget(json_path, ports)
    # Other targets are plug-ins (the entry-point group TARGET_GROUP in pyproject.toml): BMv2's
    # starts simple_switch on veths, so it lives with the emulation layer above softswitch.
    plugins = {ep.name: ep for ep in entry_points(group=TARGET_GROUP)}
    if kind not in plugins:
        known = ", ".join(["softswitch", "softswitch-native", *sorted(plugins)])
        raise ValueError(f"unknown STF target '{kind}' ({known})")
    target_class = plugins[kind].load()
    # a frame shorter than an Ethernet header cannot be sent on a veth: pcap files then
    return target_class(json_path, ports, senders, use_files=True if shortest < ETH_HEADER_LEN else None)


def run_stf(json_path: str | Path, stf_path: str | Path, target: str = "softswitch") -> StfResult:
    """Run the STF file ``stf_path`` against the BMv2 JSON program ``json_path`` on ``target``
    (``softswitch``, in this process, or ``bmv2``: simple_switch). StfError for a file that
    does not parse or names what the program lacks; Unsupported for what the target cannot do."""
    json_path, stf_path = Path(json_path), Path(stf_path)
    statements = parse_file(stf_path)
    names = ProgramNames(json.loads(json_path.read_text()))
    senders = {s["port"] for s in statements if s.command == "packet"}
    shortest = min((len(s["data"]) for s in statements if s.command == "packet"), default=ETH_HEADER_LEN)
    tgt = make_target(target, json_path, watched_ports(statements), senders, shortest)
    try:
        return Run(names, tgt).run(statements)
    finally:
        tgt.close()


class Run:
    def __init__(self, names: ProgramNames, target: Target):
        self.names, self.target = names, target
        self.result = StfResult(target.name)
        self.expected: dict[int, list[Expected]] = {}
        self.entries: dict[str, tuple[str, int]] = {}      # entry id -> (table, handle)
        self.sent_since_settle = False

    def run(self, statements: list[Statement]) -> StfResult:
        for s in statements:
            try:
                self.statement(s)
            except StfError as e:
                raise StfError(f"line {s.line}: {e}") from None
        outputs = self.target.finish()
        watched = {p for p in self.expected} | {p for p in outputs}
        r = self.result
        r.frames_out = {p: len(f) for p, f in sorted(outputs.items())}
        r.outputs = outputs
        r.differences = compare(self.expected, outputs, watched)
        r.failures += [f"packet processing error: {e}" for e in self.target.errors()]
        r.passed = not r.differences and not r.failures
        return r

    def _control(self) -> None:
        """Before a control-plane command: the packets sent so far are through the switch."""
        if self.sent_since_settle:
            self.target.settle()
            self.sent_since_settle = False

    def statement(self, s: Statement) -> None:
        t, c = self.target, s.command
        if c == "packet":
            t.send(s["port"], s["data"])
            self.result.packets_sent += 1
            self.sent_since_settle = True
            return
        if c == "expect":
            self.expected.setdefault(s["port"], []).append(Expected(s["pattern"], s["exact"], s.line))
            return
        if c == "no_packet":
            return           # the end-of-test comparison checks that nothing else came out
        self._control()
        if c == "wait":
            return
        if c == "add":
            entry = self.names.entry(s["table"], s["keys"], s["priority"], s["action"], s["params"])
            handle = t.add(entry)
            if s["entry_id"] is not None:
                self.entries[s["entry_id"]] = (entry.table.name, handle)
        elif c == "setdefault":
            table = self.names.table(s["table"])
            action = self.names.action(table, s["action"])
            t.set_default(table.name, action.name, self.names.action_data(action, s["params"]))
        elif c == "remove":
            t.clear_tables()
        elif c in ("mirroring_add", "mirroring_add_mc", "mirroring_delete", "mc_mgrp_create", "mc_node_associate"):
            getattr(t, c)(*s["numbers"])
        elif c == "mc_node_create":
            t.mc_node_create(s["first"], s["ports"])
        elif c == "mc_node_update":
            t.mc_node_update(s["first"], s["ports"])
        elif c == "counter_write":
            t.counter_write(self.names.counter(s["name"]), *s["numbers"])
        elif c == "register_write":
            t.register_write(self.names.register(s["name"]), *s["numbers"])
        elif c == "register_reset":
            t.register_reset(self.names.register(s["name"]))
        elif c == "check_counter":
            self._check_counter(s)
        elif c == "check_register":
            value = t.register(self.names.register(s["name"]), s["index"])
            self._check(s, f"register {s['name']}[{s['index']}]", value)
        elif c in INFORMATIONAL:
            self.result.not_run.append(f"line {s.line}: {c} (only prints)")
        elif c in ("meter_set_rates", "meter_array_set_rates"):
            raise Unsupported(f"{c} (meter rates from STF) is not supported by the STF runner")
        else:
            raise StfError(f"command '{c}' is not run by this runner")

    def _check_counter(self, s: Statement) -> None:
        if s["entry_id"] is not None:
            if s["entry_id"] not in self.entries:
                raise StfError(f"check_counter: no entry added as '{s['entry_id']}'")
            table, handle = self.entries[s["entry_id"]]
            packets, nbytes = self.target.direct_counter(table, handle)
            what = f"counter of entry {s['entry_id']} of {table}"
        else:
            packets, nbytes = self.target.counter(self.names.counter(s["name"]), s["index"])
            what = f"counter {s['name']}[{s['index']}]"
        self._check(s, f"{what} {s['kind']}", packets if s["kind"] == "packets" else nbytes)

    def _check(self, s: Statement, what: str, value: int) -> None:
        if not OPS[s["op"]](value, s["value"]):
            self.result.failures.append(f"line {s.line}: {what} is {value}, expected {s['op']} {s['value']}")
