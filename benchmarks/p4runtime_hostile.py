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

    .venv/bin/python benchmarks/p4runtime_hostile.py [--writes 30] [--json out/p4runtime_hostile.json]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import grpc  # noqa: E402
from p4.v1 import p4runtime_pb2 as pb  # noqa: E402

from aifabric import report  # noqa: E402
from controller.fabric_controller import Pipeline  # noqa: E402
from controller.switch import SwitchConnection  # noqa: E402
from softswitch.p4runtime import intake  # noqa: E402
from softswitch.p4runtime.server import MAX_CONCURRENT_READS  # noqa: E402
from topologies.testbed import Target, Testbed  # noqa: E402

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writes", type=int, default=30, help="Writes timed per scenario")
    ap.add_argument("--json", default=str(REPO / "out/p4runtime_hostile.json"))
    args = ap.parse_args(argv)
    waits = write_wait(args.writes)
    print(report.table(
        ["while", "Write wait median (ms)", "max (ms)", "hostile Reads ended", "MiB/Read", "s/Read"],
        [(r["scenario"], r["write_wait_median_ms"], r["write_wait_max_ms"],
          ", ".join(f"{n} {c}" for c, n in r["hostile_reads_ended"].items()) or "-",
          ",".join(str(n) for n in r["hostile_read_mib"]) or "-", r["hostile_read_s_median"] or "-")
         for r in waits],
        title="A primary's Write while hostile clients read (softswitch, tables.p4, 1,024 entries)"))
    print()
    memory = peak_memory()
    print(report.table(
        ["request", "MiB", "answer", "s", "peak RSS before (MiB)", "after (MiB)"],
        [(m["request"], round(m["bytes"] / (1 << 20), 2), m["answer"] + ("" if m["alive"] else " (DIED)"),
          m["seconds"], m["peak_rss_before_mib"], m["peak_rss_after_mib"]) for m in memory],
        title="Peak resident memory of the server under the largest requests it accepts"))
    report.write_json(args.json, {"write_wait": waits, "peak_memory": memory})
    print(f"JSON: {args.json}")
    return 0 if all(m["alive"] for m in memory) else 1


if __name__ == "__main__":
    sys.exit(main())
