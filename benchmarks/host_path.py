#!/usr/bin/env python3
"""CPU per packet of the collectives' reliable transport: the Python host path against the native
one (hostagent.collectives.host_path), on loopback and across one switch.

Two ranks, each its own process, measure themselves (getrusage: user + system time of all their
threads, the engine's included, kernel socket work included) around the traffic alone (the group
made, a warm-up call and a barrier before it):

- ring: a ring all_reduce of --ring-bytes float32, --ring-calls times (each rank sends and
  receives the same data packets; its CPU / those packets is the cost of a packet sent plus a
  packet received, half of it "each way");
- stream: rank 0 sends --stream-messages messages of --stream-bytes to rank 1 through the
  transport (send / recv), then waits for a one-packet answer: the sender's CPU / packets and
  the receiver's.

--rocev2 frames every datagram RoCEv2-like on both paths (a BTH, the process's port 4791).

Where: loopback (127.x addresses, one namespace) and, with --switch, across one softswitch (its
default packet path) between two network namespaces on veth pairs (emulation.testbed, the
basic IPv4 router of tests/p4; offloads off as on the lab's hosts), each rank in its namespace. Paths alternate within a round (their
order reversed every other round) and each figure is the median over --rounds rounds. A data
packet is one of PAYLOAD (1400) message bytes or fewer; acknowledgements and heartbeats are not
counted as packets but their cost is in the CPU.

--profile runs each workload once more on the native path under `perf record` (both ranks,
sampling only their measured window: perf starts disabled and each rank enables it through perf's
control fifo) and prints where their CPU goes: by object (kernel, the engine, libpython, numpy,
libc) and the top symbols. The ranks run with OPENBLAS_NUM_THREADS=1 (numpy's idle BLAS threads
spin otherwise, on both paths alike).

    .venv/bin/python -m benchmarks.host_path [--rounds 5] [--switch] [--profile] [--rocev2] [--json out/host_path.json]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from aifabric.lab import report  # noqa: E402

PAYLOAD = 1400
PORT = 47600
GOAL_US = 3.0                     # the native path's goal: CPU per packet, each way
PATHS = ("python", "native")
WORKLOADS = ("ring", "stream")
DONE_TAG = 1 << 20
PERF_CONTROL = "HOST_PATH_PERF_CONTROL"    # a rank's perf control fifo: "enable" at its window's start, "disable" at its end
OFFLOADS = ("tx", "off", "rx", "off", "gso", "off", "tso", "off", "gro", "off")   # a P4 target sees real checksums


# ---- one rank (a process of its own: `python -m benchmarks.host_path --rank R ...`) -------------

def ring_packets(elements: int) -> int:
    """Data packets a rank of two sends in one ring all_reduce of `elements` float32: its two
    blocks (reduce-scatter, all-gather) and the call's one-packet header agreement."""
    half = elements // 2
    return math.ceil((elements - half) * 4 / PAYLOAD) + math.ceil(half * 4 / PAYLOAD) + 1


def perf_control(command: str) -> None:
    """Tell the perf that records this rank (if any) to start or stop sampling."""
    if os.environ.get(PERF_CONTROL):
        with open(os.environ[PERF_CONTROL], "w") as fifo:
            fifo.write(command + "\n")


def rank_main(args: argparse.Namespace) -> dict:
    import numpy as np

    from hostagent.collectives.group import ProcessGroup
    from hostagent.collectives.reliable import TransportConfig

    peers = [(ip, PORT) for ip in args.peers.split(",")]
    config = TransportConfig(host_path=args.path, window=args.window, rto_s=args.rto, rocev2=args.rocev2)
    with ProcessGroup(args.rank, peers, timeout_s=120.0, transport=config) as pg:
        t = pg.transport
        if args.workload == "ring":
            x = np.ones(args.ring_bytes // 4, np.float32)
            pg.all_reduce(x, algo="ring")                   # warm-up
            pg.barrier()
            perf_control("enable")
            before, t0, s0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic(), t.stats
            for _ in range(args.ring_calls):
                pg.all_reduce(x, algo="ring")
            sent = received = args.ring_calls * ring_packets(x.size)
        else:
            x = np.ones(args.stream_bytes // 4, np.float32)
            per = math.ceil(x.nbytes / PAYLOAD)
            deadline = lambda: time.monotonic() + 60.0     # noqa: E731
            if args.rank == 0:
                t.send(1, DONE_TAG - 1, x, deadline())     # warm-up
                t.recv(1, DONE_TAG - 1, deadline())
            else:
                t.recv(0, DONE_TAG - 1, deadline())
                t.send(0, DONE_TAG - 1, b"w", deadline())
            perf_control("enable")
            before, t0, s0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic(), t.stats
            if args.rank == 0:
                for i in range(args.stream_messages):
                    t.send(1, i, x, deadline())
                t.recv(1, DONE_TAG, deadline())
                sent, received = args.stream_messages * per, 1
            else:
                for i in range(args.stream_messages):
                    t.recv(0, i, deadline())
                t.send(0, DONE_TAG, b"done", deadline())
                sent, received = 1, args.stream_messages * per
        after, wall, s1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - t0, t.stats
        perf_control("disable")
        stats = pg.stats()
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {"rank": args.rank, "path": stats["host_path"], "reason": stats["host_path_reason"], "wall_s": wall,
            "user_s": user, "sys_s": system, "cpu_s": user + system, "packets_sent": sent, "packets_received": received,
            "datagrams_sent": s1.packets_sent - s0.packets_sent, "datagrams_received": s1.packets_received - s0.packets_received,
            "retransmissions": s1.retransmissions - s0.retransmissions}


# ---- the rounds ------------------------------------------------------------------------------

def run_pair(path: str, workload: str, ips: list[str], args: argparse.Namespace, prefix: list[list[str]] | None = None,
             perf_dir: Path | None = None) -> list[dict]:
    """Both ranks of one measurement; prefix[r]: what runs rank r (ip netns exec ...)."""
    procs, env = [], {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"}
    for r in range(2):
        cmd = [sys.executable, "-m", "benchmarks.host_path", "--rank", str(r), "--peers", ",".join(ips),
               "--path", path, "--workload", workload, "--ring-bytes", str(args.ring_bytes), "--ring-calls",
               str(args.ring_calls), "--stream-bytes", str(args.stream_bytes), "--stream-messages",
               str(args.stream_messages), "--window", str(args.window), "--rto", str(args.rto),
               *(["--rocev2"] if args.rocev2 else [])]
        if perf_dir is not None:
            fifo = perf_dir / f"rank{r}.ctl"
            os.mkfifo(fifo)
            cmd = ["perf", "record", "-q", "-F", "1999", "-g", "-D", "-1", "--control", f"fifo:{fifo}",
                   "-o", str(perf_dir / f"rank{r}.data"), "--", *cmd]
            env = {**env, PERF_CONTROL: str(fifo)}
        procs.append(subprocess.Popen([*(prefix[r] if prefix else []), *cmd], cwd=REPO, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env))
    out = []
    for r, proc in enumerate(procs):
        stdout, stderr = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"{path} {workload} rank {r} failed: {stderr.strip()[-2000:]}")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def figures(ranks: list[dict], workload: str) -> dict:
    """us of CPU per data packet: ring, per packet sent + received and each way; stream, at the
    sender and at the receiver."""
    if workload == "ring":
        per = [1e6 * r["cpu_s"] / r["packets_sent"] for r in ranks]
        both = statistics.mean(per)
        return {"us_per_packet_sent_and_received": both, "us_per_packet_each_way": both / 2,
                "wall_s": max(r["wall_s"] for r in ranks)}
    return {"us_per_packet_sender": 1e6 * ranks[0]["cpu_s"] / ranks[0]["packets_sent"],
            "us_per_packet_receiver": 1e6 * ranks[1]["cpu_s"] / ranks[1]["packets_received"],
            "wall_s": max(r["wall_s"] for r in ranks)}


def rounds(where: str, ips: list[str], args: argparse.Namespace, prefix=None) -> list[dict]:
    runs = []
    for i in range(args.rounds):
        for workload in WORKLOADS:
            for path in (PATHS if i % 2 == 0 else PATHS[::-1]):
                ranks = run_pair(path, workload, ips, args, prefix)
                f = figures(ranks, workload)
                report.progress(f"{where} round {i + 1}/{args.rounds} {workload} {path}: "
                                + ", ".join(f"{k} {v:.2f}" for k, v in f.items()))
                runs.append({"where": where, "workload": workload, "path": path, "round": i, **f,
                             "reason": ranks[0]["reason"], "ranks": ranks})
    return runs


def medians(runs: list[dict]) -> list[dict]:
    rows = []
    for where in dict.fromkeys(r["where"] for r in runs):
        for workload in WORKLOADS:
            for path in PATHS:
                mine = [r for r in runs if (r["where"], r["workload"], r["path"]) == (where, workload, path)]
                if not mine:
                    continue
                keys = [k for k in mine[0] if k.startswith("us_") or k == "wall_s"]
                rows.append({"where": where, "workload": workload, "path": path, "rounds": len(mine),
                             **{k: statistics.median(r[k] for r in mine) for k in keys},
                             "retransmissions": sum(x["retransmissions"] for r in mine for x in r["ranks"])})
    return rows


# ---- across one switch -------------------------------------------------------------------------

def across_switch(args: argparse.Namespace) -> tuple[list[dict], dict]:
    """Both ranks in namespaces of their own behind one softswitch routing 10.0.1.0/24 and 10.0.2.0/24."""
    from controller import entries as E  # noqa: F401
    from controller.fabric_controller import Pipeline
    from controller.switch import SwitchConnection
    from emulation.testbed import Testbed

    pipe = Pipeline.from_build_dir(REPO / "tests/p4/build", "basic_router")
    ips, gateway_mac = ["10.0.1.1", "10.0.2.2"], "00:00:00:00:00:aa"
    with Testbed(nports=2, prefix="hpb") as tb:
        target = tb.start_target("softswitch", device_id=1)
        macs = {}
        for n, hp in tb.ports.items():
            ip, gw = ips[n - 1], f"10.0.{n}.254"
            ns = ["ip", "netns", "exec", hp.ns]
            subprocess.run([*ns, "ip", "addr", "add", f"{ip}/24", "dev", hp.host_iface], check=True)
            subprocess.run([*ns, "ip", "route", "add", "default", "via", gw], check=True)
            subprocess.run([*ns, "ip", "neigh", "replace", gw, "lladdr", gateway_mac, "dev", hp.host_iface], check=True)
            subprocess.run([*ns, "ip", "link", "set", "lo", "up"], check=True)
            for cmd in ([*ns, "ethtool", "-K", hp.host_iface], ["ethtool", "-K", hp.switch_iface]):
                subprocess.run([*cmd, *OFFLOADS], check=True, capture_output=True)   # as the lab's hosts and switches
            macs[n] = json.loads(subprocess.run([*ns, "ip", "-j", "link", "show", hp.host_iface], check=True,
                                                capture_output=True, text=True).stdout)[0]["address"]
            hp.close()                                      # no capture socket beside the ranks
        conn = SwitchConnection("host-path", target.grpc_addr, device_id=1)
        conn.connect()
        try:
            conn.set_pipeline(pipe.p4info, pipe.device_config)
            info = pipe.p4info
            conn.insert([E.entity(info.table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (f"10.0.{n}.0", 24)},
                                                   action="MyIngress.ipv4_forward",
                                                   params={"dstAddr": int(macs[n].replace(":", ""), 16), "port": n}))
                         for n in tb.ports])
            prefix = [["ip", "netns", "exec", tb.ports[n].ns] for n in (1, 2)]
            return rounds("one switch", ips, args, prefix), profiles(ips, args, prefix) if args.profile else {}
        finally:
            conn.close()


# ---- a profile ---------------------------------------------------------------------------------

def profiles(ips: list[str], args: argparse.Namespace, prefix=None) -> dict:
    more = argparse.Namespace(**{**vars(args), "ring_calls": 2 * args.ring_calls,
                                 "stream_messages": 2 * args.stream_messages})
    return {w: profile(w, ips, more, prefix) for w in WORKLOADS}


def profile(workload: str, ips: list[str], args: argparse.Namespace, prefix=None) -> dict:
    """One native measurement under perf record: CPU shares by object and the top symbols."""
    if shutil.which("perf") is None:
        return {"skipped": "perf is not on PATH"}
    work = Path(tempfile.mkdtemp(prefix="host-path-perf-"))
    try:
        ranks = run_pair("native", workload, ips, args, prefix, perf_dir=work)
        out: dict = {"figures": figures(ranks, workload)}
        out.update(by_object={}, top_symbols=[])
        for r in range(2):
            data = str(work / f"rank{r}.data")
            for key, sort in (("by_object", "dso"), ("top_symbols", "dso,sym")):
                text = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", sort, "--stdio",
                                       "-g", "none", "--percent-limit", "1.5"], capture_output=True, text=True).stdout
                rows = [line.split(None, 1) for line in text.splitlines() if line.strip() and not line.startswith("#")]
                rows = [(float(p.rstrip("%")), rest.strip()) for p, rest in rows if p.endswith("%")]
                if key == "by_object":
                    out[key][f"rank{r}"] = {name: pct for pct, name in rows}
                else:
                    out[key] += [(f"rank{r}", pct, name) for pct, name in rows[:15]]
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- main --------------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.host_path", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--switch", action="store_true", help="also across one softswitch between two namespaces (root)")
    ap.add_argument("--no-loopback", action="store_true", help="only across the switch")
    ap.add_argument("--profile", action="store_true", help="a perf profile of each workload on the native path")
    ap.add_argument("--ring-bytes", type=int, default=4 << 20)
    ap.add_argument("--ring-calls", type=int, default=5)
    ap.add_argument("--stream-bytes", type=int, default=64 << 10)
    ap.add_argument("--stream-messages", type=int, default=300)
    ap.add_argument("--rocev2", action="store_true", help="the transport framed RoCEv2-like (TransportConfig(rocev2=True))")
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--rto", type=float, default=0.05)
    ap.add_argument("--json", default=str(REPO / "out/host_path.json"))
    # one rank (internal)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--peers", help=argparse.SUPPRESS)
    ap.add_argument("--path", choices=PATHS, help=argparse.SUPPRESS)
    ap.add_argument("--workload", choices=WORKLOADS, help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.rank is not None:
        print(json.dumps(rank_main(args)), flush=True)
        return 0
    net = f"127.{os.getpid() % 200 + 20}.{int(time.time()) % 200 + 20}."
    loopback_ips = [net + "1", net + "2"]
    runs, profiled = [], {}
    if not args.no_loopback:
        runs += rounds("loopback", loopback_ips, args)
        if args.profile:
            profiled["loopback"] = profiles(loopback_ips, args)
    if args.switch:
        switch_runs, profiled["one switch"] = across_switch(args)
        runs += switch_runs
    rows = medians(runs)
    reason = next((r["reason"] for r in runs if r["path"] == "native"), "")
    print(report.table(
        ["where", "workload", "path", "us/packet sent+received", "us/packet each way", "sender us", "receiver us",
         "wall s", "resent"],
        [(r["where"], r["workload"], r["path"], _f(r.get("us_per_packet_sent_and_received")),
          _f(r.get("us_per_packet_each_way")), _f(r.get("us_per_packet_sender")), _f(r.get("us_per_packet_receiver")),
          round(r["wall_s"], 3), r["retransmissions"]) for r in rows],
        title=f"CPU per data packet of the collectives' transport{' (RoCEv2 framing)' if args.rocev2 else ''}, "
              f"medians of {args.rounds} rounds "
              f"(goal: native <= {GOAL_US} us each way); native: {reason}"))
    result = {"goal_us_each_way": GOAL_US, "rounds": args.rounds, "rocev2": args.rocev2, "ring_bytes": args.ring_bytes,
              "ring_calls": args.ring_calls, "stream_bytes": args.stream_bytes,
              "stream_messages": args.stream_messages, "native_reason": reason, "medians": rows, "runs": runs}
    if args.profile:
        result["profile"] = {where: p for where, p in profiled.items() if p}
        for where, by_workload in result["profile"].items():
            for workload, prof in by_workload.items():
                print(f"\nprofile, native, {where}, {workload} ({', '.join(f'{k} {v:.2f}' for k, v in prof.get('figures', {}).items())}):")
                for rank, shares in prof.get("by_object", {}).items():
                    print(f"  {rank} by object: " + ", ".join(f"{n} {p:.1f}%" for n, p in shares.items()))
                for rank, pct, name in prof.get("top_symbols", [])[:24]:
                    print(f"  {rank}: {pct:5.1f}%  {name}")
    report.write_json(args.json, result)
    print(f"figures written to {Path(args.json).resolve()}")
    return 0


def _f(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}"


if __name__ == "__main__":
    sys.exit(main())
