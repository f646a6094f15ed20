#!/usr/bin/env python3
"""softswitch's P4Runtime server against hostile clients: how long a controller's Write waits,
and how much memory the largest requests the server accepts cost it.

1. Write wait. A softswitch process runs tests/p4/tables.p4 with 1,024 entries in one table; the
   primary controller (controller.switch.SwitchConnection) inserts and deletes one entry of
   another table, one Write at a time, and each Write's time is taken: with no other client; while
   a client that never arbitrated reads, over and over, a request naming the big table 20,000
   times; and while as many such clients as the server runs Reads at once each read 2,000
   distinct whole-table requests (two million entries) with a 5 s deadline, over and over.
2. Peak memory. For each kind of request at the server's limits (softswitch/p4runtime/intake.py),
   a fresh softswitch process with the tables program receives that one request; the table gives
   its answer and the process's peak resident memory (VmHWM in /proc/PID/status) before and after.
3. Stream churn. With a primary connected, 300 StreamChannels open (3 clients, 5 streams at a
   time), each sends its arbitration update, and they go: cancelled, their channel closed (one
   burst in ten) or their deadline passed (one in ten). 2 s later 7 new controllers, each on a
   stream of its own with an election id below the primary's, arbitrate: how many are answered
   within 5 s (the 8 places for controllers must all be free but the primary's).
4. Writes and Reads while the pipeline is pushed again. 6 clients write (each inserts and
   deletes its own entries, one Write at a time), 1 reads, each in a process of its own, while
   the primary pushes the pipeline every 1.5 s: RECONCILE_AND_COMMIT of tests/p4/tables.p4
   with 4 tables of 1,024 entries to carry over, and VERIFY_AND_COMMIT of the fabric program
   (3 MB of BMv2 JSON); the latency percentiles of the Writes and Reads and the pushes' times.

Parts 3 and 4 run on softswitch and, where simple_switch_grpc is on PATH, on BMv2 too.

    .venv/bin/python -m benchmarks.p4runtime_hostile [--writes 30] [--parts wait,memory,churn,repush]
        [--repush-seconds 20] [--targets softswitch,bmv2] [--json out/p4runtime_hostile.json]
"""
from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import queue
import shutil
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent

import grpc  # noqa: E402
from p4.v1 import p4runtime_pb2 as pb  # noqa: E402
from p4.v1 import p4runtime_pb2_grpc as pbg  # noqa: E402

from aifabric.lab import report  # noqa: E402
from controller.fabric_controller import Pipeline  # noqa: E402
from controller.switch import SwitchConnection  # noqa: E402
from softswitch.p4runtime import intake  # noqa: E402
from softswitch.p4runtime.server import MAX_CONCURRENT_READS  # noqa: E402
from emulation.testbed import Target, Testbed  # noqa: E402

TABLES = Pipeline.from_build_dir(REPO / "tests/p4/build", "tables")
FABRIC = Pipeline.from_build_dir(REPO / "p4src/build", "fabric")
ENTRIES = 1024
REPEATS = 20_000
VARIANTS = 2_000


def _connect(target: Target, pipeline: Pipeline = TABLES) -> SwitchConnection:
    conn = SwitchConnection("bench", target.grpc_addr, device_id=1, election_id=(0, 1))
    conn.connect()
    conn.set_pipeline(pipeline.p4info, pipeline.device_config)
    return conn


def _exact(key: int) -> pb.Entity:
    return pb.Entity(table_entry=TABLES.p4info.table_entry("t_exact", {"hdr.tbl.k16": key}, action="set_exact",
                                                           params={"v": 1}))


# -- 1. Write wait ------------------------------------------------------------------------------------
def _read_loop(addr: str, request: bytes, deadline: float, stop, outcomes) -> None:
    """One hostile client: the same Read over and over until ``stop`` is set; it takes the
    answers as bytes, so its own parsing costs nothing (it runs in a process of its own, so
    neither does its interpreter lock to the controller)."""
    channel = grpc.insecure_channel(addr)
    read = channel.unary_stream("/p4.v1.P4Runtime/Read", request_serializer=None, response_deserializer=None)
    while not stop.is_set():
        t0, n = time.monotonic(), 0
        try:
            for resp in read(request, timeout=deadline):
                n += len(resp)
            code = "OK"
        except grpc.RpcError as e:
            code = e.code().name
        outcomes.put((code, n, time.monotonic() - t0))
    channel.close()


class Hostile:
    """Clients in their own processes reading in a loop until the block ends; how their Reads end."""

    def __init__(self, target: Target, request: pb.ReadRequest, clients: int, deadline: float):
        ctx = mp.get_context("spawn")               # no fork under gRPC's threads
        self._stop, self._queue = ctx.Event(), ctx.Queue()
        data = request.SerializeToString()
        self._procs = [ctx.Process(target=_read_loop, args=(target.grpc_addr, data, deadline, self._stop, self._queue),
                                   daemon=True) for _ in range(clients)]
        self.outcomes: list[tuple[str, int, float]] = []      # (status, response bytes, seconds)

    def __enter__(self) -> "Hostile":
        for p in self._procs:
            p.start()
        time.sleep(3.0)                      # the clients are up and their Reads under way
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for p in self._procs:
            p.join(timeout=90)
        while not self._queue.empty():
            self.outcomes.append(self._queue.get())


def _write_waits(conn: SwitchConnection, writes: int) -> list[float]:
    entry = pb.Entity(table_entry=TABLES.p4info.table_entry("t_hit", {"hdr.tbl.k16": 1}, action="set_hit", params={"v": 1}))
    waits = []
    for i in range(writes):
        t0 = time.monotonic()
        (conn.insert if i % 2 == 0 else conn.delete)([entry])
        waits.append(time.monotonic() - t0)
    return waits


def write_wait(writes: int) -> list[dict]:
    whole = pb.Entity(table_entry=pb.TableEntry(table_id=TABLES.p4info.table("t_exact").preamble.id))
    variants = []
    for n in range(VARIANTS):
        v = pb.Entity()
        v.CopyFrom(whole)
        v.table_entry.action.action.params.add(param_id=n + 1)     # filters nothing: all entries match
        variants.append(v)
    scenarios: list[tuple[str, Callable[[Target], Hostile | None]]] = [
        ("no other client", lambda t: None),
        (f"1 client: the table named {REPEATS:,} times per Read",
         lambda t: Hostile(t, pb.ReadRequest(device_id=1, entities=[whole] * REPEATS), 1, 60.0)),
        (f"{MAX_CONCURRENT_READS} clients: {VARIANTS:,} distinct whole-table requests per Read, 5 s deadline",
         lambda t: Hostile(t, pb.ReadRequest(device_id=1, entities=variants), MAX_CONCURRENT_READS, 5.0)),
    ]
    results = []
    with Testbed(nports=0) as tb:
        target = tb.start_target("softswitch", device_id=1)
        conn = _connect(target)
        conn.insert([_exact(k) for k in range(ENTRIES)])
        for name, make in scenarios:
            hostile = make(target)
            if hostile is None:
                waits = _write_waits(conn, writes)
                outcomes: list = []
            else:
                with hostile:
                    waits = _write_waits(conn, writes)
                outcomes = hostile.outcomes
            codes: dict[str, int] = {}
            for code, _, _ in outcomes:
                codes[code] = codes.get(code, 0) + 1
            results.append({
                "scenario": name, "writes": writes,
                "write_wait_median_ms": round(statistics.median(waits) * 1000, 1),
                "write_wait_max_ms": round(max(waits) * 1000, 1),
                "hostile_reads_ended": codes,
                "hostile_read_mib": sorted({round(n / (1 << 20), 2) for _, n, _ in outcomes}),
                "hostile_read_s_median": round(statistics.median(s for _, _, s in outcomes), 2) if outcomes else None,
            })
        conn.close()
    return results


# -- 2. Peak memory under the largest accepted requests --------------------------------------------------
def _field(number: int, payload: bytes) -> bytes:
    from softswitch.p4runtime.wire import length_delimited
    return length_delimited(number, payload)


def _requests() -> list[tuple[str, str, Callable[[], bytes]]]:
    """(name, RPC, serialized request) at the limits of intake.py."""
    hdr = pb.WriteRequest(device_id=1, election_id=pb.Uint128(low=1)).SerializeToString()
    t_exact = TABLES.p4info.table("t_exact").preamble.id

    def typical_write() -> bytes:
        one = pb.Update(type=pb.Update.INSERT, entity=_exact(0)).SerializeToString()
        n = min(intake.MAX_WRITE_UPDATES, (intake.MAX_WRITE_BYTES - len(hdr)) // (len(one) + 2))
        return hdr + b"".join(_field(4, pb.Update(type=pb.Update.INSERT, entity=_exact(k % 65536)).SerializeToString())
                              for k in range(n))

    def empty_updates() -> bytes:
        return hdr + _field(4, b"") * intake.MAX_WRITE_UPDATES

    def wide_value() -> bytes:
        e = _exact(1)
        e.table_entry.match[0].exact.value = b"\x01" * (intake.MAX_WRITE_BYTES - 200)
        return hdr + _field(4, pb.Update(type=pb.Update.INSERT, entity=e).SerializeToString())

    def distinct_reads() -> bytes:
        keys = [pb.Entity(table_entry=pb.TableEntry(table_id=t_exact, match=_exact(k).table_entry.match))
                for k in range(intake.MAX_READ_ENTITIES)]
        return pb.ReadRequest(device_id=1, entities=keys).SerializeToString()

    def nested_read() -> bytes:
        # one entity of empty match fields: the shape a parse blows up most
        te = _field(2, b"") * ((intake.MAX_READ_BYTES - 64) // 2)
        entity = _field(2, pb.TableEntry(table_id=t_exact).SerializeToString() + te)
        return pb.ReadRequest(device_id=1).SerializeToString() + _field(2, entity)

    def pipeline(json: bytes, p4info_bytes: bytes | None = None) -> bytes:
        req = pb.SetForwardingPipelineConfigRequest(device_id=1, election_id=pb.Uint128(low=1),
                                                    action=pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.config.p4info.CopyFrom(FABRIC.p4info.message)
        req.config.p4_device_config = json
        data = req.SerializeToString()
        if p4info_bytes is not None:          # a P4Info replaced by raw bytes (merged into the parse)
            cfg = pb.ForwardingPipelineConfig(p4_device_config=json).SerializeToString() + _field(1, p4info_bytes)
            data = pb.SetForwardingPipelineConfigRequest(
                device_id=1, election_id=pb.Uint128(low=1),
                action=pb.SetForwardingPipelineConfigRequest.VERIFY).SerializeToString() + _field(5, cfg)
        return data

    room = intake.MAX_REQUEST_BYTES - 64 * 1024
    mib = f"{room / (1 << 20):.1f} MiB"
    return [
        (f"Write: {intake.MAX_WRITE_UPDATES:,} table entries (<= {intake.MAX_WRITE_BYTES >> 20} MiB)", "Write",
         typical_write),
        (f"Write: {intake.MAX_WRITE_UPDATES:,} empty updates", "Write", empty_updates),
        (f"Write: one match value of {(intake.MAX_WRITE_BYTES - 200) >> 10} KiB", "Write", wide_value),
        (f"Read: {intake.MAX_READ_ENTITIES:,} entries named one by one", "Read", distinct_reads),
        (f"Read: one entity of {intake.MAX_READ_BYTES >> 10} KiB of empty match fields", "Read", nested_read),
        (f"SetForwardingPipelineConfig: the fabric ({len(FABRIC.device_config) / (1 << 20):.1f} MiB)",
         "SetForwardingPipelineConfig",
         lambda: pipeline(FABRIC.device_config)),
        (f"SetForwardingPipelineConfig: the fabric padded to {mib}", "SetForwardingPipelineConfig",
         lambda: pipeline(FABRIC.device_config + b" " * (room - len(FABRIC.device_config)))),
        (f"SetForwardingPipelineConfig: {mib} of JSON empty objects", "SetForwardingPipelineConfig",
         lambda: pipeline(b"[" + b"{}," * (room // 3 - 1) + b"{}]")),
        (f"SetForwardingPipelineConfig: a P4Info of {intake.MAX_P4INFO_BYTES >> 10} KiB of empty tables",
         "SetForwardingPipelineConfig",
         lambda: pipeline(FABRIC.device_config, _field(2, b"") * (intake.MAX_P4INFO_BYTES // 2 - 8))),
    ]


def peak_memory() -> list[dict]:
    results = []
    for name, rpc, build in _requests():
        data = build()
        with Testbed(nports=0) as tb:
            target = tb.start_target("softswitch", device_id=1)
            conn = _connect(target)
            conn.insert([_exact(k) for k in range(ENTRIES)])
            before = target.memory_mib("VmHWM")
            channel = grpc.insecure_channel(target.grpc_addr, options=[("grpc.max_send_message_length", -1),
                                                                       ("grpc.max_receive_message_length", -1)])
            t0 = time.monotonic()
            try:
                if rpc == "Read":
                    call = channel.unary_stream(f"/p4.v1.P4Runtime/{rpc}", request_serializer=None,
                                                response_deserializer=None)
                    for _ in call(data, timeout=300):
                        pass
                else:
                    channel.unary_unary(f"/p4.v1.P4Runtime/{rpc}", request_serializer=None,
                                        response_deserializer=None)(data, timeout=300)
                answer = "OK"
            except grpc.RpcError as e:
                answer = f"{e.code().name}: {(e.details() or '')[:60]}"
            seconds = time.monotonic() - t0
            results.append({"request": name, "bytes": len(data), "answer": answer, "seconds": round(seconds, 2),
                            "peak_rss_before_mib": round(before, 1),
                            "peak_rss_after_mib": round(target.memory_mib("VmHWM"), 1),
                            "alive": target.proc.poll() is None})
            channel.close()
            conn.close()
    return results


# -- 3. StreamChannel churn -----------------------------------------------------------------------------
CHURN_CYCLES = 300
CHURNERS = 3
BURST = 5
NEW_CONTROLLERS = 7
PRIMARY_ELECTION = (0, 1 << 40)


def _arbitration(election: tuple[int, int]) -> pb.StreamMessageRequest:
    req = pb.StreamMessageRequest()
    req.arbitration.device_id = 1
    req.arbitration.election_id.high, req.arbitration.election_id.low = election
    return req


def churn_streams(addr: str, first: int, cycles: int, hold: threading.Event) -> None:
    """``cycles`` streams, opened ``BURST`` at a time, each sending its arbitration update, then
    all gone at once: mostly by cancelling their calls, one burst in ten by closing the channel
    (a disconnect), one in ten by a deadline passing (tests/softswitch/test_p4runtime_limits.py
    churns with it too)."""
    def requests(election):
        yield _arbitration(election)
        hold.wait()                                    # never half-closes

    for b in range(0, cycles, BURST):
        how = (b // BURST) % 10
        channel = grpc.insecure_channel(addr)
        stub = pbg.P4RuntimeStub(channel)
        elections = [(0, first + i) for i in range(b, min(b + BURST, cycles))]
        if how == 9:                                   # deadline
            for call in [stub.StreamChannel(requests(e), timeout=0.05) for e in elections]:
                with contextlib.suppress(grpc.RpcError):
                    for _ in call:
                        pass
        else:
            calls = [stub.StreamChannel(requests(e)) for e in elections]
            time.sleep(0.002)
            if how != 8:                               # 8: the channel closed (a disconnect)
                for call in calls:
                    call.cancel()
        channel.close()


def _arbitrate(stub, election: tuple[int, int], streams: list) -> str:
    """A new stream's arbitration answer within 5 s (its code), or how the stream ended."""
    out: queue.Queue = queue.Queue()
    hold = threading.Event()

    def requests():
        yield _arbitration(election)
        hold.wait()
    call = stub.StreamChannel(requests())
    streams.append((call, hold))

    def first() -> None:
        try:
            out.put(next(call).arbitration.status.code)
        except grpc.RpcError as e:
            out.put(e.code().name)
        except StopIteration:
            out.put("ended OK")
    threading.Thread(target=first, daemon=True).start()
    try:
        got = out.get(timeout=5)
    except queue.Empty:
        return "no answer in 5 s"
    return {0: "OK", 6: "ALREADY_EXISTS"}.get(got, str(got)) if isinstance(got, int) else got


def churn(target: Target) -> dict:
    channel = grpc.insecure_channel(target.grpc_addr)
    stub = pbg.P4RuntimeStub(channel)
    streams: list = []
    primary = _arbitrate(stub, PRIMARY_ELECTION, streams)
    hold = threading.Event()
    per = CHURN_CYCLES // CHURNERS
    t0 = time.monotonic()
    churners = [threading.Thread(target=churn_streams, args=(target.grpc_addr, 1000 + n * per, per, hold))
                for n in range(CHURNERS)]
    for t in churners:
        t.start()
    for t in churners:
        t.join()
    churn_s = time.monotonic() - t0
    hold.set()
    time.sleep(2.0)
    answers = [_arbitrate(stub, (0, 100 + n), streams) for n in range(NEW_CONTROLLERS)]
    for call, h in streams:
        h.set()
        call.cancel()
    channel.close()
    return {"target": target.kind, "primary": primary, "cycles": CHURN_CYCLES, "churn_s": round(churn_s, 1),
            "answered": sum(a in ("OK", "ALREADY_EXISTS") for a in answers), "of": NEW_CONTROLLERS,
            "answers": dict(Counter(answers))}


# -- 4. Writes and Reads during pipeline pushes ---------------------------------------------------------
WRITERS = 6
PUSH_EVERY = 1.5
KEYS = 5                        # entries each writer inserts and deletes in turn


def _write_loop(addr: str, requests: list[bytes], stop, out) -> None:
    """One writer (a process of its own): its Writes in turn until ``stop``; (seconds, code) each."""
    channel = grpc.insecure_channel(addr)
    write = channel.unary_unary("/p4.v1.P4Runtime/Write", request_serializer=None, response_deserializer=None)
    got, i = [], 0
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            write(requests[i % len(requests)], timeout=120)
            code = "OK"
        except grpc.RpcError as e:
            code = e.code().name
        got.append((time.monotonic() - t0, code))
        if i == 0:
            out.put(("ready", None))
        i += 1
    out.put(("write", got))
    channel.close()


def _read_loop_timed(addr: str, request: bytes, stop, out) -> None:
    channel = grpc.insecure_channel(addr)
    read = channel.unary_stream("/p4.v1.P4Runtime/Read", request_serializer=None, response_deserializer=None)
    got = []
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            for _ in read(request, timeout=120):
                pass
            code = "OK"
        except grpc.RpcError as e:
            code = e.code().name
        got.append((time.monotonic() - t0, code))
        if len(got) == 1:
            out.put(("ready", None))
    out.put(("read", got))
    channel.close()


def _write_requests(entity: Callable[[int], pb.Entity], first: int) -> list[bytes]:
    """A writer's Writes: insert each of its KEYS entries, then delete each."""
    out = []
    for utype in (pb.Update.INSERT, pb.Update.DELETE):
        for k in range(first, first + KEYS):
            req = pb.WriteRequest(device_id=1, election_id=pb.Uint128(low=1))
            req.updates.add(type=utype, entity=entity(k))
            out.append(req.SerializeToString())
    return out


def _push(channel: grpc.Channel, pipeline: Pipeline, action: int) -> str:
    req = pb.SetForwardingPipelineConfigRequest(device_id=1, election_id=pb.Uint128(low=1), action=action)
    req.config.p4info.CopyFrom(pipeline.p4info.message)
    req.config.p4_device_config = pipeline.device_config
    try:
        pbg.P4RuntimeStub(channel).SetForwardingPipelineConfig(req, timeout=120)
        return "OK"
    except grpc.RpcError as e:
        return f"{e.code().name}: {(e.details() or '')[:60]}"


def _percentiles(samples: list[float]) -> dict:
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)
    return {"n": len(ordered), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": round(ordered[-1] * 1000, 1),
            "over_1s": sum(x > 1 for x in ordered), "over_5s": sum(x > 5 for x in ordered)}


def _fill_tables(conn: SwitchConnection) -> None:
    """4 tables of tables.p4 full: the state a RECONCILE_AND_COMMIT carries over."""
    info = TABLES.p4info
    conn.insert([_exact(k) for k in range(ENTRIES)])
    conn.insert([pb.Entity(table_entry=info.table_entry("t_lpm", {"hdr.tbl.k32": (k << 8, 24)}, action="set_lpm",
                                                        params={"v": 1})) for k in range(ENTRIES)])
    for table, field in (("t_constdef", "hdr.tbl.k16"), ("t_defparam", "hdr.tbl.k32")):
        conn.insert([pb.Entity(table_entry=info.table_entry(table, {field: k}, action=table.replace("t_", "set_"),
                                                            params={"v": 1})) for k in range(ENTRIES)])


def _repush_scenarios() -> list[dict]:
    hit = TABLES.p4info.table("t_hit").preamble.id
    return [
        {"name": f"RECONCILE_AND_COMMIT, tables.p4, 4 x {ENTRIES:,} entries carried over", "pipeline": TABLES,
         "action": pb.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT, "fill": _fill_tables,
         "entity": lambda k: pb.Entity(table_entry=TABLES.p4info.table_entry("t_hit", {"hdr.tbl.k16": k},
                                                                             action="set_hit", params={"v": 1})),
         "read": pb.ReadRequest(device_id=1, entities=[pb.Entity(table_entry=pb.TableEntry(table_id=hit))])},
        {"name": f"VERIFY_AND_COMMIT, fabric.p4 ({len(FABRIC.device_config) / (1 << 20):.1f} MB JSON)",
         "pipeline": FABRIC, "action": pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, "fill": None,
         "entity": lambda k: pb.Entity(table_entry=FABRIC.p4info.table_entry("my_station", {"eth_dst": k},
                                                                             action="set_routable")),
         "read": pb.ReadRequest(device_id=1, entities=[pb.Entity(table_entry=pb.TableEntry(
             table_id=FABRIC.p4info.table("my_station").preamble.id))])},
    ]


def repush(target_kind: str, seconds: float) -> list[dict]:
    results = []
    ctx = mp.get_context("spawn")
    for sc in _repush_scenarios():
        with Testbed(nports=0) as tb:
            target = tb.start_target(target_kind, device_id=1)
            conn = _connect(target, sc["pipeline"])
            if sc["fill"] is not None:
                sc["fill"](conn)
            stop, out = ctx.Event(), ctx.Queue()
            writes = [_write_requests(sc["entity"], 1 + n * KEYS) for n in range(WRITERS)]
            procs = [ctx.Process(target=_write_loop, args=(target.grpc_addr, w, stop, out), daemon=True)
                     for w in writes]
            procs.append(ctx.Process(target=_read_loop_timed, args=(target.grpc_addr, sc["read"].SerializeToString(),
                                                                    stop, out), daemon=True))
            for p in procs:
                p.start()
            for _ in procs:                            # each client has had an answer
                assert out.get(timeout=180)[0] == "ready"
            time.sleep(1.0)
            pusher = grpc.insecure_channel(target.grpc_addr, options=[("grpc.max_send_message_length", -1)])
            pushes: list[tuple[float, str]] = []
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                t0 = time.monotonic()
                outcome = _push(pusher, sc["pipeline"], sc["action"])
                pushes.append((time.monotonic() - t0, outcome))
                time.sleep(max(0.0, PUSH_EVERY - (time.monotonic() - t0)))
            stop.set()
            got: dict[str, list] = {"write": [], "read": []}
            for _ in procs:
                kind, samples = out.get(timeout=180)
                got[kind] += samples
            for p in procs:
                p.join(timeout=30)
            pusher.close()
            conn.close()
        push_s = [s for s, _ in pushes]
        results.append({
            "target": target_kind, "scenario": sc["name"], "seconds": seconds,
            "writes": _percentiles([s for s, _ in got["write"]]), "reads": _percentiles([s for s, _ in got["read"]]),
            "write_outcomes": dict(Counter(c for _, c in got["write"])),
            "read_outcomes": dict(Counter(c for _, c in got["read"])),
            "pushes": len(pushes), "push_outcomes": dict(Counter(o for _, o in pushes)), "push_every_s": PUSH_EVERY,
            "push_s_median": round(statistics.median(push_s), 2), "push_s_max": round(max(push_s), 2),
        })
    return results


def _targets(wanted: str) -> list[str]:
    out = []
    for t in wanted.split(","):
        if t == "bmv2" and not shutil.which("simple_switch_grpc"):
            print("BMv2: simple_switch_grpc is not on PATH, skipped")
            continue
        out.append(t)
    return out


def _print_churn(rows: list[dict]) -> None:
    print(report.table(
        ["target", "streams churned", "s", f"new controllers answered (of {NEW_CONTROLLERS})", "answers"],
        [(r["target"], r["cycles"], r["churn_s"], r["answered"], ", ".join(f"{n} {a}" for a, n in r["answers"].items()))
         for r in rows],
        title="StreamChannel churn: open, arbitrate, go away (cancel, disconnect, deadline); then 7 new controllers"))


def _print_repush(rows: list[dict]) -> None:
    def pct(d: dict) -> tuple:
        return (d["n"], d.get("p50_ms", "-"), d.get("p99_ms", "-"), d.get("max_ms", "-"), d.get("over_1s", "-"))
    def failed(outcomes: dict) -> int:
        return sum(n for code, n in outcomes.items() if code != "OK")
    print(report.table(
        ["target", "pushed every 1.5 s", "pushes (failed)", "push s (median/max)", "Writes", "p50 ms", "p99 ms",
         "max ms", "> 1 s", "Reads", "p50 ms", "p99 ms", "max ms", "> 1 s", "Writes/Reads not OK"],
        [(r["target"], r["scenario"], f"{r['pushes']} ({failed(r['push_outcomes'])})",
          f"{r['push_s_median']}/{r['push_s_max']}", *pct(r["writes"]), *pct(r["reads"]),
          f"{failed(r['write_outcomes'])}/{failed(r['read_outcomes'])}") for r in rows],
        title=f"{WRITERS} writers and 1 reader while the primary pushes the pipeline again (a Write that deletes "
              f"an entry a VERIFY_AND_COMMIT wiped fails, as it should)"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writes", type=int, default=30, help="Writes timed per scenario")
    ap.add_argument("--parts", default="wait,memory,churn,repush", help="which parts to run (comma-separated)")
    ap.add_argument("--repush-seconds", type=float, default=20.0, help="how long pushes go on per scenario")
    ap.add_argument("--targets", default="softswitch,bmv2", help="targets of the churn and repush parts")
    ap.add_argument("--json", default=str(REPO / "out/p4runtime_hostile.json"))
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    data: dict = {}
    if "wait" in parts:
        data["write_wait"] = waits = write_wait(args.writes)
        print(report.table(
            ["while", "Write wait median (ms)", "max (ms)", "hostile Reads ended", "MiB/Read", "s/Read"],
            [(r["scenario"], r["write_wait_median_ms"], r["write_wait_max_ms"],
              ", ".join(f"{n} {c}" for c, n in r["hostile_reads_ended"].items()) or "-",
              ",".join(str(n) for n in r["hostile_read_mib"]) or "-", r["hostile_read_s_median"] or "-")
             for r in waits],
            title="A primary's Write while hostile clients read (softswitch, tables.p4, 1,024 entries)"))
        print()
    if "memory" in parts:
        data["peak_memory"] = memory = peak_memory()
        print(report.table(
            ["request", "MiB", "answer", "s", "peak RSS before (MiB)", "after (MiB)"],
            [(m["request"], round(m["bytes"] / (1 << 20), 2), m["answer"] + ("" if m["alive"] else " (DIED)"),
              m["seconds"], m["peak_rss_before_mib"], m["peak_rss_after_mib"]) for m in memory],
            title="Peak resident memory of the server under the largest requests it accepts"))
        print()
    targets = _targets(args.targets)
    if "churn" in parts:
        rows = []
        for kind in targets:
            with Testbed(nports=0) as tb:
                rows.append(churn(tb.start_target(kind, device_id=1)))
        data["churn"] = rows
        _print_churn(rows)
        print()
    if "repush" in parts:
        data["repush"] = rows = [r for kind in targets for r in repush(kind, args.repush_seconds)]
        _print_repush(rows)
    report.write_json(args.json, data)
    print(f"JSON: {args.json}")
    return 0 if all(m["alive"] for m in data.get("peak_memory", [])) else 1


if __name__ == "__main__":
    sys.exit(main())
