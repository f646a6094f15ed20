#!/usr/bin/env python3
"""Packets per second and CPU per packet through a P4 target: softswitch and BMv2 side by side.

Saturation (always): for each program, target and round, one switch sits between veth pairs
(host ends in namespaces); a generator process blasts frames into port 1 for a few seconds
and the frames leaving port 2 are counted by the kernel of port 2's host interface (all that
reached it: the benchmark's Python reader of that port, on a machine whose two cores also run
the generator and the switch, kept 80% of them in a run under load, and a count of what it read
made the switch's cost per packet look a quarter higher than it was; what it read is reported
beside). Reported per program and target, as medians over the rounds (targets alternate within
a round, their order reversed every other round, so a slow spell of the shared machine falls
on all of them): the delivered rate under overload, the offered rate, and the switch's CPU time
per delivered packet (user + system time of the switch process and its children, from /proc,
over the traffic window), with the ratio of softswitch's delivered rate to each BMv2 build's.
Programs: a plain IPv4 router (tests/p4/basic_router.p4), the fabric (p4src/fabric.p4: routing
plus an ECMP selector) and the fabric's in-network aggregation (314-byte aggregation packets
of a job whose root is this switch with one child, so every packet completes its slot: 64
register reads and writes, and one result out of port 2).
BMv2 runs with --log-level off (its best case; the fabric runs it with logging) from the build
on PATH and from an optimised build at /opt/bmv2-opt where present. softswitch runs twice: as
users run it (its compiled packet path, built before the run, where Cython and a C compiler
are), as ``softswitch-python`` (the generated Python alone, the reference), as
``softswitch-native`` (the native data path: pipeline and loop in C, --native on, its ports
read and written through AF_PACKET sockets, --port-io packet) and as ``softswitch-native-af_xdp``
(the same through AF_XDP sockets, --port-io af_xdp). Each run also reads the switch process's
memory after the traffic (PSS and private, smaps_rollup).

--baseline REV runs softswitch as it was at an earlier revision beside today's, as the target
``softswitch@COMMIT`` (benchmarks/past_softswitch.py), with the ratio of today's to it: how a
speed goal stated against "today's" cost is checked on this machine, in one run.

Fabric (--fabric): a running k=4 fat-tree per target, one UDP flow between pods at a stated
offered load (--fabric-pps). Every switch's CPU time is read over an idle window and over the
traffic; the flow crosses five switches, the five whose CPU grew most, and their cost per
packet is (CPU during traffic - idle CPU over the same time) / packets received. The
optimised BMv2 build runs a fabric by being first on PATH.

    .venv/bin/python -m benchmarks.target_pps [--seconds 5] [--rounds 3] [--json out/target_pps.json]
    .venv/bin/python -m benchmarks.target_pps --programs fabric --targets softswitch --baseline 5259bc8
    .venv/bin/python -m benchmarks.target_pps --fabric [--fabric-pps 2000] [--fabric-seconds 10]
"""
from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Iterator
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")   # the generator forks while gRPC threads run

from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import raw  # noqa: E402

from benchmarks import past_softswitch  # noqa: E402
from aifabric.lab import report  # noqa: E402
from controller import entries as E  # noqa: E402
from controller.p4names import Action, Table  # noqa: E402
from controller.fabric_controller import Pipeline  # noqa: E402
from controller.routing import NextHop  # noqa: E402
from controller.switch import SwitchConnection  # noqa: E402
from softswitch.native import build as native_build  # noqa: E402
from softswitch.pipeline.compiled import PathCompiler  # noqa: E402
from softswitch.pipeline.program import Program  # noqa: E402
from emulation.testbed import HostPort, Testbed  # noqa: E402

ROUTER_MAC = "00:00:00:00:00:aa"
FLOWS = 64          # distinct UDP source ports, so the fabric's ECMP hash varies


def frames() -> list[bytes]:
    return [raw(Ether(dst="00:00:00:00:00:aa", src="00:00:00:00:00:01")
                / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64) / UDP(sport=49152 + i, dport=4791)
                / bytes(64)) for i in range(FLOWS)]


def setup_basic_router(pipe: Pipeline, conn: SwitchConnection) -> None:
    info = pipe.p4info
    conn.insert([E.entity(info.table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.2.0", 24)},
                                           action="MyIngress.ipv4_forward",
                                           params={"dstAddr": 0xBB02, "port": 2}))])


def setup_fabric(pipe: Pipeline, conn: SwitchConnection) -> None:
    hop = NextHop(port=2, smac=ROUTER_MAC, dmac="00:00:00:00:bb:02", neighbor="sink")
    conn.insert([E.my_station(pipe.p4info, ROUTER_MAC), *E.static_route(pipe.p4info, "10.0.2.0/24", hop)])


def setup_aggregation(pipe: Pipeline, conn: SwitchConnection) -> None:
    from p4.v1 import p4runtime_pb2
    info = pipe.p4info
    pre = p4runtime_pb2.PacketReplicationEngineEntry()
    pre.multicast_group_entry.multicast_group_id = 0x1001
    pre.multicast_group_entry.replicas.add(egress_port=2, instance=1)
    conn.insert([E.entity(pre)])
    conn.insert([
        E.entity(info.table_entry(Table.AGGREGATION_AGG_JOBS, {"job_id": 1}, action=Action.AGGREGATION_AGGREGATE_ROOT,
                                  params={"epoch": 1, "slot_base": 0, "slot_count": FLOWS, "fan_in": 1, "group": 0x1001})),
        E.entity(info.table_entry(Table.AGGREGATION_AGG_RESULT_DST, {"egress_port": 2},
                                  action=Action.AGGREGATION_TO_WORKER,
                                  params={"smac": ROUTER_MAC, "dmac": "00:00:00:00:bb:02", "ipv4": "10.0.2.2"}))])


def aggregation_frames() -> list[bytes]:
    import numpy as np
    from hostagent.collectives.aggregation.protocol import AGG_UDP_PORT, AggHeader, PktType, pack_packet
    values = np.arange(64, dtype=np.int32)
    return [raw(Ether(dst=ROUTER_MAC, src="00:00:00:00:00:01") / IP(src="10.0.1.1", dst="10.0.9.9")
                / UDP(sport=AGG_UDP_PORT, dport=AGG_UDP_PORT, chksum=0)
                / pack_packet(AggHeader(PktType.CONTRIB, 0, 1, i, set_id, 0, 1, 127, i), values))
            for set_id in (0, 1) for i in range(FLOWS)]     # the other set clears the child's bit: never a retransmission


# program -> (build directory, JSON name, control-plane setup, frames)
PROGRAMS = {
    "basic_router": (REPO / "tests/p4/build", "basic_router", setup_basic_router, frames),
    "fabric": (REPO / "p4src/build", "fabric", setup_fabric, frames),
    "aggregation": (REPO / "p4src/build", "fabric", setup_aggregation, aggregation_frames),
}


def blast(port: HostPort, payloads: list[bytes], seconds: float, sent: mp.Value) -> None:
    """Child process: send as fast as the socket takes them for ``seconds``."""
    send = port.sock.send
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for f in payloads:
            try:
                send(f)
                n += 1
            except BlockingIOError:
                pass
    sent.value = n


# BMv2 builds to compare with: the one on PATH, and an optimised one (built with BMv2's
# recommended `CXXFLAGS=-O3 --disable-logging-macros --disable-elogger`) where present.
BMV2_OPTIMISED = Path("/opt/bmv2-opt/bin/simple_switch_grpc")
BMV2_QUIET = "off"                        # BMv2's log level here: no log lines at all
CLK_TCK = os.sysconf("SC_CLK_TCK")
PATH_SWITCHES = 5                         # switches a flow between pods of a fat-tree crosses
# softswitch's two packet paths: "softswitch" as users run it, compiled where Cython and a C
# compiler are (built before the run, so it runs compiled from its first packet), and
# "softswitch-python", the generated Python alone (the reference the compiled path must match)
# and "softswitch-native", the native data path (its library built at the pipeline push, cached)
# and "softswitch-native-af_xdp", the native data path on AF_XDP sockets (its port I/O apart)
TARGET_KIND = {"softswitch-python": "softswitch", "softswitch-native": "softswitch",
               "softswitch-native-af_xdp": "softswitch"}
SOFTSWITCH_ARGS = {"softswitch": ("--compiled", "now"), "softswitch-python": ("--compiled", "off", "--native", "off"),
                   "softswitch-native": ("--compiled", "off", "--native", "on", "--port-io", "packet"),
                   "softswitch-native-af_xdp": ("--compiled", "off", "--native", "on", "--port-io", "af_xdp")}
TARGET_LETTER = {"softswitch": "s", "softswitch-python": "p", "softswitch-native": "n", "softswitch-native-af_xdp": "x",
                 "bmv2": "b", "bmv2-opt": "o"}
PAST_EXECUTABLES: dict[str, str] = {}     # "softswitch@COMMIT" -> its executable (--baseline)


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU time of each process with all its (live) descendants, in seconds;
    /proc is read once for all of them. A process of ``pids`` that is gone raises TargetGone
    (it would read 0: a negative or tiny CPU time per packet)."""
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()     # after "pid (comm) "
        children.setdefault(int(fields[1]), []).append(int(entry))
        if fields[0] not in ("Z", "X"):          # a zombie has exited: gone, though still listed
            times[int(entry)] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    out = {}
    for pid in pids:
        if pid not in times:
            raise TargetGone(f"process {pid} is gone: its CPU time cannot be read")
        total, todo = 0.0, [pid]
        while todo:
            p = todo.pop()
            total += times.get(p, 0.0)
            todo += children.get(p, [])
        out[pid] = total
    return out


def memory_mib(pid: int) -> dict[str, float]:
    """The process's proportional set size (its shared pages divided among their users) and
    its private memory, in MiB (/proc/PID/smaps_rollup)."""
    kb = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if rest.strip().endswith("kB"):
            kb[name] = int(rest.split()[0])
    return {"pss_mib": round(kb.get("Pss", 0) / 1024, 1),
            "private_mib": round((kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0)) / 1024, 1)}


class TargetGone(RuntimeError):
    """The measured target process is gone (it exited or was killed during the run)."""


class GeneratorFailed(RuntimeError):
    """The forked load generator died (a child forked while gRPC threads run may abort): the
    run says nothing about the target and is made again."""


def measure(target: str, program: str, seconds: float, attempts: int = 3) -> dict:
    for _ in range(attempts - 1):
        try:
            return measure_once(target, program, seconds)
        except GeneratorFailed as e:
            report.progress(f"{e}; again")
    return measure_once(target, program, seconds)


def measure_once(target: str, program: str, seconds: float) -> dict:
    build_dir, json_name, setup, make_frames = PROGRAMS[program]
    pipe = Pipeline.from_build_dir(build_dir, json_name)
    kind, exe = ("bmv2", str(BMV2_OPTIMISED)) if target == "bmv2-opt" else (TARGET_KIND.get(target, target), None)
    exe = PAST_EXECUTABLES.get(target, exe)
    with Testbed(nports=2, prefix=f"bp{TARGET_LETTER[target]}") as tb:
        t = tb.start_target(kind, device_id=1, executable=exe, bmv2_log_level=BMV2_QUIET,
                            extra_args=SOFTSWITCH_ARGS.get(target, ()))
        conn = SwitchConnection(f"{target}", t.grpc_addr, device_id=1)
        conn.connect()
        try:
            conn.set_pipeline(pipe.p4info, pipe.device_config)
            setup(pipe, conn)
            payloads = make_frames()
            # warm-up: one frame through, so first-packet costs are not measured
            tb.ports[1].send(payloads[0])
            if not tb.ports[2].receive(timeout=2.0, count=1):
                raise RuntimeError(f"{target}/{program}: the warm-up frame did not come out of port 2")
            tb.drain()
            sent = mp.Value("q", 0)
            gen = mp.get_context("fork").Process(target=blast, args=(tb.ports[1], payloads, seconds, sent))
            pid = t.proc.pid
            rx = tb.ports[2]
            kernel0 = rx.kernel_rx_packets()
            cpu0 = cpu_seconds([pid])[pid]
            t0 = time.monotonic()
            gen.start()
            received = 0
            while time.monotonic() - t0 < seconds + 1.0:
                received += len(rx.receive(timeout=0.2, quiet=0.05))
            gen.join()
            cpu = cpu_seconds([pid])[pid] - cpu0
            delivered_frames = rx.kernel_rx_packets() - kernel0
            memory = memory_mib(pid)
            if gen.exitcode != 0 or not sent.value:
                raise GeneratorFailed(f"{target}/{program}: the load generator died (exit code {gen.exitcode})")
        finally:
            conn.close()
    offered = sent.value / seconds
    delivered = delivered_frames / seconds
    return {"target": target, "program": program, "seconds": seconds, "sent": sent.value,
            "delivered": delivered_frames, "received": received, "offered_pps": round(offered),
            "delivered_pps": round(delivered), "read_pps": round(received / seconds),
            "loss_pct": round(100.0 * (1 - delivered_frames / sent.value), 1) if sent.value else 0.0,
            "cpu_s": round(cpu, 2),
            "cpu_us_per_packet": round(1e6 * cpu / delivered_frames, 2) if delivered_frames else None,
            **memory}


def summarise(results: list[dict], programs: list[str], targets: list[str]) -> list[dict]:
    """Median delivered rate and CPU per packet per (program, target) over the rounds."""
    out = []
    for program in programs:
        for target in targets:
            runs = [r for r in results if r["program"] == program and r["target"] == target]
            cpu = [r["cpu_us_per_packet"] for r in runs if r["cpu_us_per_packet"] is not None]
            out.append({"program": program, "target": target, "rounds": len(runs),
                        "offered_pps": round(statistics.median(r["offered_pps"] for r in runs)),
                        "delivered_pps": round(statistics.median(r["delivered_pps"] for r in runs)),
                        "read_pps": round(statistics.median(r["read_pps"] for r in runs)),
                        "delivered_min": min(r["delivered_pps"] for r in runs),
                        "delivered_max": max(r["delivered_pps"] for r in runs),
                        "cpu_us_per_packet": round(statistics.median(cpu), 2) if cpu else None,
                        "pss_mib": statistics.median(r["pss_mib"] for r in runs),
                        "private_mib": statistics.median(r["private_mib"] for r in runs)})
    return out


def saturation(programs: list[str], targets: list[str], seconds: float, rounds: int) -> tuple[list, list]:
    results = []
    for rnd in range(rounds):
        order = targets if rnd % 2 == 0 else targets[::-1]
        for program in programs:
            for target in order:
                report.progress(f"round {rnd + 1}/{rounds}: {target} / {program}: {seconds:g} s of traffic")
                results.append(dict(measure(target, program, seconds), round=rnd + 1))
    summary = summarise(results, programs, targets)
    rows = [(s["program"], s["target"], s["offered_pps"], s["delivered_pps"],
             f"{s['delivered_min']}..{s['delivered_max']}", s["read_pps"], s["cpu_us_per_packet"], s["pss_mib"],
             s["private_mib"]) for s in summary]
    print(report.table(["program", "target", "offered pps", "delivered pps (median)", "range", "read by the sink",
                        "CPU us / packet", "PSS MiB", "private MiB"],
                       rows, title=f"Saturation through one switch, medians of {rounds} rounds (106-byte frames; "
                                   "aggregation: 314; port 1 -> port 2)"))
    by = {(s["program"], s["target"]): s for s in summary}
    for program in programs:
        for mine, theirs in (("softswitch", "bmv2"), ("softswitch", "bmv2-opt"), ("softswitch-python", "bmv2-opt"),
                             ("softswitch-native", "bmv2-opt"), ("softswitch-native", "softswitch"),
                             ("softswitch-native-af_xdp", "softswitch-native"),
                             ("softswitch", "softswitch-python"), *(("softswitch", p) for p in PAST_EXECUTABLES)):
            soft, other = by.get((program, mine)), by.get((program, theirs))
            if soft and other and other["delivered_pps"]:
                line = f"{program}: {mine} / {theirs} = {soft['delivered_pps'] / other['delivered_pps']:.2f} (rate)"
                if soft["cpu_us_per_packet"] and other["cpu_us_per_packet"]:
                    line += f", {other['cpu_us_per_packet'] / soft['cpu_us_per_packet']:.2f} (CPU per packet)"
                print(line)
    return results, summary


@contextlib.contextmanager
def lab_target(target: str) -> Iterator[str]:
    """The Lab target kind for ``target``, with what the switches must find in the environment
    meanwhile: for ``bmv2-opt`` the optimised build first on PATH (a fabric's switches are
    started by name, ``simple_switch_grpc``); for ``softswitch-python`` SOFTSWITCH_COMPILED=off
    (and the native path off); for the native targets the native path on and their port I/O."""
    env = {"bmv2-opt": {"PATH": f"{BMV2_OPTIMISED.parent}{os.pathsep}{os.environ['PATH']}"},
           "softswitch-python": {"SOFTSWITCH_COMPILED": "off", "SOFTSWITCH_NATIVE": "off"},
           "softswitch-native": {"SOFTSWITCH_NATIVE": "on", "SOFTSWITCH_PORT_IO": "packet"},
           "softswitch-native-af_xdp": {"SOFTSWITCH_NATIVE": "on", "SOFTSWITCH_PORT_IO": "af_xdp"}}.get(target, {})
    with mock.patch.dict(os.environ, env):
        yield "bmv2" if target == "bmv2-opt" else TARGET_KIND.get(target, target)


def build_compiled_paths(programs: list[str]) -> None:
    """softswitch's compiled path for each program, built now (cached) rather than during a
    measurement; without Cython or a compiler, "softswitch" runs the Python path and says so."""
    why = PathCompiler().missing()
    if why:
        SOFTSWITCH_ARGS["softswitch"] = ("--compiled", "off")
        report.progress(f"softswitch runs its Python path: {why}")
        return
    for json_path in sorted({PROGRAMS[p][0] / f"{PROGRAMS[p][1]}.json" for p in programs}):
        report.progress(f"compiled packet path for {json_path.name} (once per program text; ~2 minutes for the fabric)")
        PathCompiler().build(Program(json_path.read_bytes()))


def add_past_target(rev: str, programs: list[str]) -> str:
    """softswitch at ``rev`` as a target of this run (built first where it had a compiled path)."""
    report.progress(f"softswitch at {rev}: its tree, and its compiled packet path where it had one")
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / "aifabric-past-softswitch"
    try:
        commit, exe = past_softswitch.prepare(
            rev, workdir, sorted({PROGRAMS[p][0] / f"{PROGRAMS[p][1]}.json" for p in programs}),
            compiled_path=SOFTSWITCH_ARGS["softswitch"] == ("--compiled", "now"))
    except past_softswitch.PastError as e:
        raise SystemExit(f"--baseline {rev}: {e}") from None
    target = f"softswitch@{commit}"
    PAST_EXECUTABLES[target] = str(exe)
    TARGET_KIND[target] = "softswitch"
    TARGET_LETTER[target] = str(len(PAST_EXECUTABLES) - 1)      # a testbed prefix letter
    SOFTSWITCH_ARGS[target] = SOFTSWITCH_ARGS["softswitch"]    # dropped where that revision had no such option
    return target


def fabric_cost(target: str, pps: int, seconds: float, idle_seconds: float = 4.0) -> dict:
    """Per-switch CPU in a running k=4 fat-tree carrying one flow between pods at ``pps``."""
    from aifabric.lab.lab import Lab
    from aifabric.lab.traffic import receiver_result, sender_result, start_paced_sender, start_receiver
    from topologies.fabric import fat_tree

    fabric = fat_tree(4)
    with lab_target(target) as kind, Lab(fabric, target=kind, progress=report.progress) as lab:
        pids = lab.switch_pids()

        def sample() -> dict[str, float]:
            by_pid = cpu_seconds(list(pids.values()))
            return {n: by_pid[p] for n, p in pids.items()}

        a, b = fabric.hosts[0], fabric.hosts[-1]
        c0 = sample()
        time.sleep(idle_seconds)
        c1 = sample()
        rx = start_receiver(lab.host(b.name), 5001, quiet=2.0, limit=seconds + 30)
        t0 = time.monotonic()
        tx = start_paced_sender(lab.host(a.name), str(b.ip4.ip), 40000, 5001, pps, int(pps * seconds), size=64)
        sent = sender_result(tx)
        window = time.monotonic() - t0
        c2 = sample()
        got = sum(f.packets for f in receiver_result(rx).values())
    idle = {n: (c1[n] - c0[n]) / idle_seconds for n in pids}               # CPU seconds per second
    busy = {n: (c2[n] - c1[n]) - idle[n] * window for n in pids}           # CPU the traffic added
    path = sorted(pids, key=lambda n: busy[n], reverse=True)[:PATH_SWITCHES]
    per_packet = [1e6 * busy[n] / got for n in path] if got else []
    return {"target": target, "k": 4, "switches": len(pids), "offered_pps": pps, "seconds": round(window, 1),
            "sent": sent.sent, "received": got,
            "idle_cpu_pct_mean": round(100 * sum(idle.values()) / len(idle), 1),
            "path": path, "path_cpu_pct": [round(100 * (c2[n] - c1[n]) / window, 1) for n in path],
            "path_us_per_packet": [round(x, 1) for x in per_packet],
            "path_us_per_packet_mean": round(sum(per_packet) / len(per_packet), 1) if per_packet else None}


def fabric_table(rows: list[dict]) -> None:
    print(report.table(
        ["target", "offered pps", "received", "idle CPU % / switch", "path switches' CPU %", "us / packet / switch"],
        [(r["target"], r["offered_pps"], r["received"], r["idle_cpu_pct_mean"],
          " ".join(map(str, r["path_cpu_pct"])), r["path_us_per_packet_mean"]) for r in rows],
        title="Cost per switch in a running k=4 fat-tree (one 106-byte UDP flow between pods, 5 switches)"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=str(REPO / "out/target_pps.json"))
    ap.add_argument("--targets", nargs="*", default=None,
                    help="softswitch (as users run it), softswitch-python, softswitch-native (AF_PACKET port "
                         "I/O), softswitch-native-af_xdp, bmv2, bmv2-opt (default: those installed)")
    ap.add_argument("--programs", nargs="*", default=list(PROGRAMS), choices=list(PROGRAMS))
    ap.add_argument("--fabric", action="store_true", help="measure the per-switch cost in a k=4 fat-tree instead")
    ap.add_argument("--fabric-pps", type=int, default=2000, help="offered load of the flow between pods")
    ap.add_argument("--fabric-seconds", type=float, default=10.0)
    ap.add_argument("--baseline", nargs="*", default=[], metavar="REV",
                    help="also run softswitch as it was at these git revisions (saturation only)")
    args = ap.parse_args(argv)
    if args.baseline and args.fabric:
        ap.error("--baseline measures saturation through one switch, not --fabric")
    targets = args.targets or (["softswitch", "softswitch-python"]
                               + (["softswitch-native", "softswitch-native-af_xdp"] if native_build.missing() is None else [])
                               + (["bmv2"] if shutil.which("simple_switch_grpc") else [])
                               + (["bmv2-opt"] if BMV2_OPTIMISED.exists() else []))
    unknown = [t for t in targets if t not in TARGET_LETTER]
    if unknown:
        ap.error(f"--targets: unknown {', '.join(unknown)} (known: {', '.join(TARGET_LETTER)})")
    if "softswitch" in targets:
        build_compiled_paths(["fabric"] if args.fabric else args.programs)
    for rev in args.baseline:
        targets.append(add_past_target(rev, args.programs))
    if args.fabric:
        rows = []
        for target in targets:
            report.progress(f"{target}: k=4 fat-tree, {args.fabric_pps} pps for {args.fabric_seconds:g} s")
            rows.append(fabric_cost(target, args.fabric_pps, args.fabric_seconds))
        fabric_table(rows)
        report.write_json(args.json, {"fabric": rows})
    else:
        results, summary = saturation(args.programs, targets, args.seconds, args.rounds)
        report.write_json(args.json, {"results": results, "summary": summary})
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
