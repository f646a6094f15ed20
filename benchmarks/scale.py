#!/usr/bin/env python3
"""How a fat-tree's cost grows with k on one machine, and what that means for a Swarm.

For each k (default 4, 6, 8), in a child process with a deadline: bring-up time (switch targets
answering P4Runtime, then the controller programming every switch), memory per switch (RSS, and
PSS: shared pages split among the processes sharing them, so PSS sums to what the switches really
take; the switch processes' totals over the switches, so a process serving a group of switches
counts once), CPU per switch (CPU seconds the switch processes used during bring-up, and their
share of a core while the programmed fabric idles), the machine's MemAvailable drop (switches,
host namespaces, controller) and 32 seeded host pairs pinging once each. The switches are one a
process while the fabric fits in memory, else served by groups (aifabric.lab.memory_plan; or
``--switches-per-process N``). A k that misses its
deadline is interrupted (the lab tears down) and reported as such.

Then, where a Docker engine runs, the per-container deployment itself (`aifabric compose` on a
single-node Swarm, `aifabric.containers.swarm`) for ``--swarm-k`` (default 4): time from ``docker stack
deploy`` to the first ping across the fabric, and every container's memory and CPU share as
``docker stats`` gives them, idle, by kind (switch, host, controller). From those (or, without an
engine, from the processes measured above) it estimates what one node needs per switch and per
host and how many nodes a k=16 fat-tree (320 switches, 1024 hosts) needs with
``--node-cores``/``--node-mem-gib`` per node; a container's own cost outside its cgroup (its
runtime shim) is measured on one idle container.

Run under the fabric lock (it brings fabrics up):

    flock /tmp/aifabric-fabric.lock .venv/bin/python -m benchmarks.scale [--k 4 6 8] [--timeout 240]
        [--swarm-k 4 | --swarm-k 0] [--target softswitch] [--switches-per-process N] [--json out/scale.json]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from aifabric.lab import report

IDLE_WINDOW_S = 5.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
MEM_HEADROOM = 0.75        # share of a node's memory the fabric may take
CPU_IDLE_BUDGET = 0.5      # share of a node's cores the idle fabric may take (the rest forwards)
K16_SWITCHES, K16_HOSTS = 5 * 16 * 16 // 4, 16 ** 3 // 4
SAMPLED_PAIRS = 32         # host pairs that ping once each (seeded), whatever k


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat after the command name: item 0 is field 3 of stat(5) (the state)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


class ProcessGone(RuntimeError):
    """A measured process is gone: its CPU and memory would read 0 and pull every mean down."""


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds; ProcessGone when it is gone."""
    try:
        fields = _stat(pid)
    except OSError:
        raise ProcessGone(f"process {pid} is gone") from None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK      # fields 14 and 15 of stat(5)


def gone(pids: dict[str, int]) -> list[str]:
    """Names of the processes (name -> pid) that are gone, zombies included."""
    out = []
    for name, pid in pids.items():
        try:
            if _stat(pid)[0] in ("Z", "X"):
                out.append(name)
        except OSError:
            out.append(name)
    return sorted(out)


def container_overhead_mib(image: str = "debian:bookworm") -> float | None:
    """What one more container costs besides its own processes: the RSS of the runtime's shim
    (containerd-shim, the parent of the container's first process) of an idle container; None
    without a Docker engine or the image."""
    from aifabric.lab.lab import rss_mib

    def docker(*args: str) -> str:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60, check=True).stdout.strip()

    try:
        cid = docker("run", "-d", "--rm", "--network", "none", image, "sleep", "60")
    except (OSError, subprocess.SubprocessError):
        return None
    try:
        time.sleep(1.0)
        return round(rss_mib(int(_stat(int(docker("inspect", "-f", "{{.State.Pid}}", cid)))[1])), 1)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, timeout=60, check=False)


def sampled_pairs(lab, count: int, seed: int = 1) -> tuple[int, list[str]]:
    """``count`` host pairs picked with ``seed`` ping once each (2 s each at most): (pairs, the
    pairs that did not reach)."""
    import random

    hosts = lab.fabric.hosts
    rng = random.Random(seed)
    pairs = [tuple(rng.sample(hosts, 2)) for _ in range(count)]
    failed = [f"{a.name}->{b.name}" for a, b in pairs
              if " 0% packet loss" not in lab.host(a.name).cmd(f"ping -c 1 -W 2 {b.ip4.ip}")]
    return len(pairs), failed


def measure(k: int, target: str, switches_per_process: int | None = None) -> dict:
    """One fabric, measured (runs in the child)."""
    from aifabric.lab.lab import Lab, pss_mib, rss_mib
    from aifabric.lab.memory_plan import mem_available_mib
    from topologies.fabric import fat_tree

    fabric = fat_tree(k)
    before_mib = mem_available_mib()
    with Lab(fabric, target=target, progress=report.progress, switches_per_process=switches_per_process) as lab:
        names = lab.target_pids()         # one a process: a group of switches is one
        pids = list(names.values())
        try:
            bringup_cpu = [cpu_seconds(p) for p in pids]
            t0, idle0 = time.monotonic(), [cpu_seconds(p) for p in pids]
            time.sleep(IDLE_WINDOW_S)
            idle_share = [(cpu_seconds(p) - c) / (time.monotonic() - t0) for p, c in zip(pids, idle0)]
            rss, pss = [rss_mib(p) for p in pids], [pss_mib(p) for p in pids]
        except ProcessGone:
            pass                   # which ones: named just below
        if gone(names):        # a gone switch reads 0 CPU and 0 MiB: no mean is made with it
            return {"k": k, "target": target, "status": f"switch process gone: {', '.join(gone(names))}"}
        host_rss = [rss_mib(h.pid) for h in lab.net.hosts]
        used_mib = before_mib - mem_available_mib()
        pairs, unreached = sampled_pairs(lab, SAMPLED_PAIRS)
        n = len(fabric.switches)          # figures per switch: a process's, shared by its switches
        return {"k": k, "target": target, "switches": n, "hosts": len(fabric.hosts),
                "processes": len(pids), "status": "ok" if not unreached else f"unreached: {', '.join(unreached)}",
                "sampled_pairs": pairs,
                "targets_s": round(lab.bring_up.targets_s, 1), "program_s": round(lab.bring_up.program_s, 1),
                "total_s": round(lab.bring_up.total_s, 1),
                "rss_mean_mib": round(sum(rss) / n, 1), "pss_mean_mib": round(sum(pss) / n, 1),
                "pss_total_mib": round(sum(pss)), "mem_drop_mib": used_mib,
                "host_rss_mean_mib": round(sum(host_rss) / len(host_rss), 1),
                "bringup_cpu_s_per_switch": round(sum(bringup_cpu) / n, 2),
                "idle_cpu_pct_per_switch": round(100 * sum(idle_share) / n, 2)}


def run_child(k: int, target: str, timeout: float, switches_per_process: int | None = None) -> dict:
    """``measure`` in a child process; interrupted (SIGINT: the lab tears down) at the deadline."""
    started = time.monotonic()
    grouping = ["--switches-per-process", str(switches_per_process)] if switches_per_process else []
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.scale", "--child", str(k), "--target", target,
                             *grouping], stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        from emulation.cleanup import cleanup
        left = cleanup()
        return {"k": k, "target": target, "status": f"not up within {timeout:.0f} s (interrupted; "
                f"cleanup: {left.remaining.describe() if left else 'nothing left'})",
                "elapsed_s": round(time.monotonic() - started)}
    lines = out.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"k": k, "target": target, "status": f"failed (exit {proc.returncode}; see stderr)"}
    return json.loads(lines[-1])


def measure_swarm(k: int) -> dict:
    """fat_tree(k) as containers on a single-node Swarm: deploy to first ping, then every
    container's ``docker stats`` after IDLE_WINDOW_S, by kind; the deployment is removed after."""
    import tempfile

    from aifabric.containers.swarm import DockerError, SwarmFabric, build_images
    from topologies.fabric import fat_tree

    try:
        build_images()
        fab = SwarmFabric.deploy(fat_tree(k), Path(tempfile.mkdtemp(prefix="aifabric-scale-")),
                                 stack="aifabricscale", progress=report.progress)
    except (DockerError, ValueError, OSError, subprocess.SubprocessError) as err:
        return {"k": k, "status": f"not deployed: {str(err).splitlines()[0][:200]}"}
    try:
        time.sleep(IDLE_WINDOW_S)
        stats = fab.container_stats()
    finally:
        left = fab.remove()
    kinds = {"switch": [sw.name for sw in fab.fabric.switches], "host": [h.name for h in fab.fabric.hosts],
             "controller": ["controller"]}
    result = {"k": k, "status": "ok", "deploy_to_first_ping_s": round(fab.timings["deploy_to_first_ping_s"], 1),
              "containers": len(stats), "left_after_removal": left}
    for kind, names in kinds.items():
        seen = [stats[n] for n in names if n in stats]
        result[f"{kind}_container_mib"] = round(sum(m for _, m in seen) / len(seen), 1) if seen else None
        result[f"{kind}_cpu_pct"] = round(sum(c for c, _ in seen) / len(seen), 2) if seen else None
    return result


def swarm_estimate(r: dict, node_cores: int, node_mem_gib: float, container_mib: float | None,
                   swarm: dict | None = None) -> dict:
    """Per-node needs of a per-container deployment, and nodes for a k=16 fat-tree, from one
    measured k. With a measured Swarm deployment (``swarm``): a switch or host container = its
    mean ``docker stats`` memory + its shim (``container_mib``; 0 when unknown). Without: a
    switch container = a switch process's RSS (a container shares no heap; RSS also counts the
    libraries a node's containers share, so this errs high) + its shim, a host container = a host
    shell's RSS + its shim (a host container runs more: its node process). CPU: the idle share of
    a core per switch (its container's, measured on the Swarm), kept under `CPU_IDLE_BUDGET` of a
    node's cores; memory under
    `MEM_HEADROOM` of a node's. The machine's MemAvailable drop is not used: other work on the
    machine moves it."""
    shim = container_mib or 0.0
    idle = r["idle_cpu_pct_per_switch"] / 100
    if swarm is not None and swarm.get("status") == "ok":
        switch_mib, host_mib = swarm["switch_container_mib"] + shim, swarm["host_container_mib"] + shim
        idle = swarm["switch_cpu_pct"] / 100        # the container's all: target, node process
    else:
        switch_mib, host_mib = r["rss_mean_mib"] + shim, r["host_rss_mean_mib"] + shim
    k16_mib = K16_SWITCHES * switch_mib + K16_HOSTS * host_mib
    node_mib = node_mem_gib * 1024 * MEM_HEADROOM
    nodes_by_cpu = math.ceil(K16_SWITCHES * idle / (node_cores * CPU_IDLE_BUDGET))
    return {"from_k": r["k"], "source": "swarm" if swarm and swarm.get("status") == "ok" else "processes",
            "container_mib": container_mib, "switch_container_mib": round(switch_mib, 1),
            "host_container_mib": round(host_mib, 1), "idle_cpu_pct_per_switch": round(100 * idle, 2),
            "bringup_cpu_s_per_switch": r["bringup_cpu_s_per_switch"],
            "node_cores": node_cores, "node_mem_gib": node_mem_gib,
            "k16_switches": K16_SWITCHES, "k16_hosts": K16_HOSTS, "k16_mem_gib": round(k16_mib / 1024, 1),
            "k16_nodes_by_mem": math.ceil(k16_mib / node_mib), "k16_nodes_by_idle_cpu": nodes_by_cpu,
            "k16_nodes": max(1, math.ceil(k16_mib / node_mib), nodes_by_cpu),
            "k16_bringup_cpu_s": round(K16_SWITCHES * r["bringup_cpu_s_per_switch"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, nargs="+", default=[4, 6, 8])
    ap.add_argument("--target", default="softswitch")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds a k may take, bring-up to teardown")
    ap.add_argument("--node-cores", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--node-mem-gib", type=float, default=None, help="default: this machine's MemTotal")
    ap.add_argument("--swarm-k", type=int, default=4, help="k deployed as containers on a single-node Swarm (0: none)")
    ap.add_argument("--json", default=str(REPO / "out/scale.json"))
    ap.add_argument("--switches-per-process", type=int, default=None,
                    help="softswitch switches a process (default: one each while the fabric fits, else groups; "
                         "aifabric.lab.memory_plan)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        print(json.dumps(measure(args.child, args.target, args.switches_per_process)), flush=True)
        return 0
    results = [run_child(k, args.target, args.timeout, args.switches_per_process) for k in args.k]
    print(report.table(
        ["k", "switches", "processes", "status", "targets up (s)", "program (s)", "RSS/sw (MiB)", "PSS/sw (MiB)",
         "mem drop (MiB)", "bring-up CPU/sw (s)", "idle CPU/sw (%)"],
        [(r["k"], r.get("switches", 5 * r["k"] ** 2 // 4), r.get("processes", "-"), r["status"], r.get("targets_s", "-"),
          r.get("program_s", "-"), r.get("rss_mean_mib", "-"), r.get("pss_mean_mib", "-"),
          r.get("mem_drop_mib", "-"), r.get("bringup_cpu_s_per_switch", "-"), r.get("idle_cpu_pct_per_switch", "-"))
         for r in results],
        title=f"Fat-tree scale on one machine ({args.target}, {os.cpu_count()} cores)"))
    swarm = measure_swarm(args.swarm_k) if args.swarm_k else None
    if swarm is not None:
        print(report.table(
            ["k", "status", "containers", "deploy to first ping (s)", "switch (MiB)", "host (MiB)",
             "controller (MiB)", "CPU/switch idle (%)", "left after removal"],
            [(swarm["k"], swarm["status"], swarm.get("containers", "-"), swarm.get("deploy_to_first_ping_s", "-"),
              swarm.get("switch_container_mib", "-"), swarm.get("host_container_mib", "-"),
              swarm.get("controller_container_mib", "-"), swarm.get("switch_cpu_pct", "-"),
              swarm.get("left_after_removal") or "nothing")],
            title="Every node a container, single-node Swarm (docker stats, idle; shims not counted)"))
    measured = [r for r in results if r["status"] == "ok"]
    estimate = None
    if measured:
        mem_gib = args.node_mem_gib or round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
        estimate = swarm_estimate(max(measured, key=lambda r: r["k"]), args.node_cores, mem_gib,
                                  container_overhead_mib(), swarm)
        e = estimate
        print(report.table(
            ["from k", "shim (MiB)", "switch container (MiB)", "host container (MiB)", "idle CPU/sw (%)", "node",
             "k=16 memory (GiB)", "k=16 nodes (mem, cpu)", "k=16 bring-up CPU (s)"],
            [(e["from_k"], e["container_mib"] or "?", e["switch_container_mib"], e["host_container_mib"],
              e["idle_cpu_pct_per_switch"], f"{e['node_cores']} cores, {e['node_mem_gib']} GiB", e["k16_mem_gib"],
              f"{e['k16_nodes']} ({e['k16_nodes_by_mem']}, {e['k16_nodes_by_idle_cpu']})", e["k16_bringup_cpu_s"])],
            title=f"Swarm per node, and a k=16 fat-tree (320 switches, 1024 hosts), from the {e['source']}"))
    report.write_json(args.json, {"results": results, "swarm": swarm, "swarm_estimate": estimate})
    print(f"JSON: {args.json}")
    return 0 if measured else 1


if __name__ == "__main__":
    sys.exit(main())
