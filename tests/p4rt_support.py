"""Helpers for the P4Runtime tests: compiled test programs, an in-process softswitch, and a
small raw-gRPC P4Runtime client that exposes per-update errors. Veth ports in network
namespaces come from `emulation.testbed.Testbed`.

Everything here talks to the real thing: real interfaces, the real `Switch`, real gRPC with the
p4runtime protos.
"""
from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import grpc
import pytest
from google.protobuf import text_format
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb
from p4.v1 import p4runtime_pb2_grpc as pbg

from emulation.testbed import Target, Testbed, free_tcp_port

# The compiled test programs; SOFTSWITCH_TEST_P4_BUILD points elsewhere (e.g. a scratch p4c run).
BUILD = Path(os.environ.get("SOFTSWITCH_TEST_P4_BUILD", Path(__file__).resolve().parent / "p4" / "build"))
INS, MOD, DEL = pb.Update.INSERT, pb.Update.MODIFY, pb.Update.DELETE


# -- compiled programs --------------------------------------------------------------------------
@dataclass
class CompiledProgram:
    name: str
    json_path: Path
    p4info_path: Path
    p4info: p4info_pb2.P4Info

    @property
    def json(self) -> bytes:
        return self.json_path.read_bytes()

    def _find(self, kind: str, name: str):
        objs = list(getattr(self.p4info, kind))
        for o in objs:
            if o.preamble.name == name or o.preamble.alias == name or o.preamble.name.endswith("." + name):
                return o
        raise KeyError(f"{self.name}: no {kind} named {name}")

    def table(self, name: str) -> p4info_pb2.Table:
        return self._find("tables", name)

    def table_id(self, name: str) -> int:
        return self.table(name).preamble.id

    def action_id(self, name: str) -> int:
        return self._find("actions", name).preamble.id

    def id(self, kind: str, name: str) -> int:
        return self._find(kind, name).preamble.id

    def field_id(self, table: str, field_name: str) -> int:
        for mf in self.table(table).match_fields:
            if mf.name == field_name or mf.name.endswith("." + field_name):
                return mf.id
        raise KeyError(f"{self.name}: table {table} has no match field {field_name}")

    def metadata_id(self, header: str, name: str) -> int:
        for md in self._find("controller_packet_metadata", header).metadata:
            if md.name == name:
                return md.id
        raise KeyError(name)


def require_program(name: str) -> CompiledProgram:
    """The compiled test program ``tests/p4/<name>.p4``, or skip the test."""
    json_path = BUILD / f"{name}.json"
    p4info_path = BUILD / f"{name}.p4info.txtpb"
    if not json_path.exists() or not p4info_path.exists():
        pytest.skip(f"tests/p4/build/{name}.json and {name}.p4info.txtpb are not built yet (needs p4c)")
    info = text_format.Parse(p4info_path.read_text(), p4info_pb2.P4Info(), allow_unknown_field=True)
    return CompiledProgram(name, json_path, p4info_path, info)


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (veth interfaces, network namespaces, raw sockets)")


# -- the switch ----------------------------------------------------------------------------------
@contextlib.contextmanager
def running_switch(ports: dict[int, str] | None = None, cpu_port: int | None = 255,
                   device_id: int = 1, **config) -> Iterator[tuple[object, str]]:
    """An in-process softswitch (`Switch`) with these ports and other `SwitchConfig` fields;
    yields (switch, grpc address)."""
    from softswitch.ports import PortSpec
    from softswitch.switch import Switch, SwitchConfig

    addr = f"127.0.0.1:{free_tcp_port()}"
    specs = [PortSpec(n, i) for n, i in (ports or {}).items()]
    sw = Switch(SwitchConfig(device_id=device_id, ports=specs, cpu_port=cpu_port, grpc_addr=addr, **config))
    sw.start()
    try:
        yield sw, addr
    finally:
        sw.stop()


# fixtures of the modules of softswitch's P4Runtime server (imported by name where used)
@pytest.fixture
def switch():
    """A softswitch without ports (device 1); yields (switch, gRPC address)."""
    with running_switch(ports={}, cpu_port=255) as (sw, addr):
        yield sw, addr


@pytest.fixture
def client(switch):
    c = Client(switch[1])
    yield c
    c.close()


@pytest.fixture
def veths(request):
    """A Testbed without ports yet, named by the module's VETH_PREFIX (modules on other
    pytest-xdist workers make theirs at the same time)."""
    require_root()
    v = Testbed(nports=0, prefix=request.module.VETH_PREFIX)
    yield v
    v.teardown()


@contextlib.contextmanager
def softswitch_process(device_id: int = 1, extra_args: tuple[str, ...] = ()) -> Iterator[Target]:
    """A softswitch process without ports (``--no-p4``), for tests that watch the process itself
    (its memory, its survival); yields its `Target` (``grpc_addr``, ``proc``)."""
    with Testbed(nports=0) as tb:
        yield tb.start_target("softswitch", device_id=device_id, extra_args=extra_args)


# -- a raw P4Runtime client ----------------------------------------------------------------------
def update_errors(err: grpc.RpcError) -> list[tuple[str, str]] | None:
    """(code name, message) per update from the grpc-status-details-bin trailer, or None."""
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status()
            status.ParseFromString(value)
            out = []
            for detail in status.details:
                e = pb.Error()
                assert detail.Unpack(e), "detail is not a p4.v1.Error"
                out.append((code_pb2.Code.Name(e.canonical_code), e.message))
            return out
    return None


class Stream:
    """One StreamChannel; received messages are queued, the final status kept."""

    def __init__(self, stub: pbg.P4RuntimeStub):
        self._out: "queue.Queue[pb.StreamMessageRequest | None]" = queue.Queue()
        self.received: "queue.Queue[pb.StreamMessageResponse]" = queue.Queue()
        self.ended = threading.Event()
        self.end_code: grpc.StatusCode | None = None
        self.end_details = ""
        self._call = stub.StreamChannel(iter(self._out.get, None))
        self._thread = threading.Thread(target=self._rx, daemon=True)
        self._thread.start()

    def _rx(self) -> None:
        try:
            for msg in self._call:
                self.received.put(msg)
            self.end_code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            self.end_code, self.end_details = e.code(), e.details()
        finally:
            self.ended.set()

    def send(self, msg: pb.StreamMessageRequest) -> None:
        self._out.put(msg)

    def arbitrate(self, election: tuple[int, int] | None, device_id: int = 1, role: str | None = None) -> None:
        req = pb.StreamMessageRequest()
        req.arbitration.device_id = device_id
        if election is not None:
            req.arbitration.election_id.high, req.arbitration.election_id.low = election
        if role is not None:
            req.arbitration.role.name = role
        self.send(req)

    def next(self, kind: str | None = None, timeout: float = 3.0) -> pb.StreamMessageResponse | None:
        """The next message (of this ``update`` kind, others are skipped), or None."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                msg = self.received.get(timeout=left)
            except queue.Empty:
                return None
            if kind is None or msg.WhichOneof("update") == kind:
                return msg

    def wait_end(self, timeout: float = 3.0) -> grpc.StatusCode | None:
        self.ended.wait(timeout)
        return self.end_code

    def close(self) -> None:
        self._out.put(None)
        self._call.cancel()
        self._thread.join(timeout=5)


class Client:
    """``options``: the channel's; by default room for a full batch of error details (None),
    ``[]`` for a client with gRPC's defaults."""

    def __init__(self, addr: str, device_id: int = 1, election: tuple[int, int] | None = (0, 1),
                 options: list[tuple[str, int]] | None = None):
        self.channel = grpc.insecure_channel(
            addr, options=options if options is not None else [("grpc.max_metadata_size", 1 << 20)])
        grpc.channel_ready_future(self.channel).result(timeout=10)
        self.stub = pbg.P4RuntimeStub(self.channel)
        self.device_id = device_id
        self.election = election
        self.streams: list[Stream] = []
        self.stream: Stream | None = None

    def open_stream(self, election: tuple[int, int] | None = None, primary: bool = True) -> Stream:
        s = Stream(self.stub)
        self.streams.append(s)
        s.arbitrate(election or self.election, self.device_id)
        msg = s.next("arbitration")
        assert msg is not None, "no arbitration answer"
        if primary:
            assert msg.arbitration.status.code == code_pb2.OK, msg
        self.stream = self.stream or s
        return s

    def set_pipeline(self, program: CompiledProgram,
                     action: int = pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                     cookie: int | None = None, p4info: p4info_pb2.P4Info | None = None,
                     device_config: bytes | None = None) -> None:
        req = pb.SetForwardingPipelineConfigRequest(device_id=self.device_id, action=action)
        self._election(req)
        req.config.p4info.CopyFrom(p4info if p4info is not None else program.p4info)
        req.config.p4_device_config = device_config if device_config is not None else program.json
        if cookie is not None:
            req.config.cookie.cookie = cookie
        self.stub.SetForwardingPipelineConfig(req, timeout=30)

    def _election(self, req) -> None:
        if self.election is not None:
            req.election_id.high, req.election_id.low = self.election

    def write(self, *updates: tuple[int, pb.Entity], election: tuple[int, int] | None = None,
              timeout: float = 10) -> list[tuple[str, str]] | None:
        """None when every update succeeded, else (code, message) per update (OK ones too).
        RPC-wide errors (any status but UNKNOWN) are raised."""
        req = pb.WriteRequest(device_id=self.device_id)
        self._election(req)
        if election is not None:
            req.election_id.high, req.election_id.low = election
        for utype, entity in updates:
            req.updates.add(type=utype, entity=entity)
        try:
            self.stub.Write(req, timeout=timeout)
            return None
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNKNOWN:
                raise
            details = update_errors(e)
            assert details is not None, "UNKNOWN without grpc-status-details-bin"
            assert len(details) == len(updates)
            return details

    def write_ok(self, *updates: tuple[int, pb.Entity]) -> None:
        errors = self.write(*updates)
        assert errors is None, errors

    def write_error(self, update: tuple[int, pb.Entity]) -> tuple[str, str]:
        errors = self.write(update)
        assert errors is not None, "the update was accepted"
        return errors[0]

    def read(self, *entities: pb.Entity) -> list[pb.Entity]:
        req = pb.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        out = []
        for resp in self.stub.Read(req, timeout=10):
            out.extend(resp.entities)
        return out

    def close(self) -> None:
        for s in self.streams:
            s.close()
        self.channel.close()


# -- entity builders ---------------------------------------------------------------------------
def exact(fid: int, value: bytes) -> pb.FieldMatch:
    return pb.FieldMatch(field_id=fid, exact=pb.FieldMatch.Exact(value=value))


def lpm(fid: int, value: bytes, plen: int) -> pb.FieldMatch:
    return pb.FieldMatch(field_id=fid, lpm=pb.FieldMatch.LPM(value=value, prefix_len=plen))


def ternary(fid: int, value: bytes, mask: bytes) -> pb.FieldMatch:
    return pb.FieldMatch(field_id=fid, ternary=pb.FieldMatch.Ternary(value=value, mask=mask))


def rng(fid: int, low: bytes, high: bytes) -> pb.FieldMatch:
    return pb.FieldMatch(field_id=fid, range=pb.FieldMatch.Range(low=low, high=high))


def optional(fid: int, value: bytes) -> pb.FieldMatch:
    return pb.FieldMatch(field_id=fid, optional=pb.FieldMatch.Optional(value=value))


def action(action_id: int, *params: bytes) -> pb.Action:
    return pb.Action(action_id=action_id,
                     params=[pb.Action.Param(param_id=i + 1, value=v) for i, v in enumerate(params)])


def table_entry(table_id: int, match: list[pb.FieldMatch] | None = None, act: pb.Action | None = None,
                priority: int = 0, **kw) -> pb.Entity:
    te = pb.TableEntry(table_id=table_id, match=match or [], priority=priority, **kw)
    if act is not None:
        te.action.action.CopyFrom(act)
    return pb.Entity(table_entry=te)
