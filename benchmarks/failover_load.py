#!/usr/bin/env python3
"""What failure handling costs a k=4 fat-tree that carries no traffic: CPU per part.

One fabric (softswitch unless ``--target``), then for each setting a quiet window of
``--seconds``: no failure handling; controller heartbeats alone; controller heartbeats with the
switches' link heartbeats at each interval of ``--link-ms``. Each window reports the CPU share
(of the machine's cores) of the switch targets, the controller (this process: its stream
threads and the heartbeat ticker), the link-heartbeat generator and the whole machine
(/proc/stat), and the lateness the controller's heartbeats arrived with (the monitor's own
measure, which stretches detection). Prints a table, writes JSON. Measures, asserts nothing.

    .venv/bin/python -m benchmarks.failover_load [--seconds 15] [--link-ms 10 20 50] [--target softswitch]
        [--json out/failover_load.json]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path


from aifabric.lab import report  # noqa: E402
from aifabric.lab.cpu_meter import cpu_times  # noqa: E402
from aifabric.lab.lab import Lab  # noqa: E402
from controller.failover import HeartbeatConfig, start_failure_handling  # noqa: E402
from topologies.fabric import fat_tree  # noqa: E402
from emulation.failover_heartbeat_generator import HeartbeatGenerator  # noqa: E402
from emulation.p4switch import RUN_DIR  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process and its threads used so far; 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def _window(lab: Lab, seconds: float) -> dict:
    """CPU shares over ``seconds`` of quiet, per part, and the heartbeats' lateness."""
    parts = {"switches": list(lab.switch_pids().values()), "controller": [os.getpid()],
             "generator": [lab.heartbeats.process.pid] if lab.heartbeats and lab.heartbeats.process else []}
    before = {name: sum(_cpu_s(p) for p in pids) for name, pids in parts.items()}
    total0, idle0 = cpu_times()
    start = time.monotonic()
    late = 0.0
    while time.monotonic() - start < seconds:
        time.sleep(0.5)
        if lab.failure_handler is not None:
            late = max(late, lab.failure_handler.monitor.lateness)
    elapsed = time.monotonic() - start
    total1, idle1 = cpu_times()
    share = {name: (sum(_cpu_s(p) for p in pids) - before[name]) / elapsed / CORES for name, pids in parts.items()}
    share["machine"] = 1 - (idle1 - idle0) / max(1.0, total1 - total0)
    handler = lab.failure_handler
    return {**{k: round(v, 4) for k, v in share.items()}, "lateness_ms": round(1000 * late, 1),
            "dead_ports": len(handler.dead_ports()) if handler else None}


def _settings(link_ms: list[float]) -> list[tuple[str, HeartbeatConfig | None]]:
    base = HeartbeatConfig()
    return ([("none", None), ("controller heartbeats", replace(base, link_interval_ms=None))]
            + [(f"+ link heartbeats {ms:g} ms", replace(base, link_interval_ms=ms)) for ms in link_ms])


def _use(lab: Lab, config: HeartbeatConfig | None) -> None:
    """Failure handling as ``config`` says (None: off), the generator at its interval."""
    if lab.failure_handler is not None:
        lab.failure_handler.stop()
        lab.failure_handler = None
    if lab.heartbeats is not None:
        lab.heartbeats.stop()
        lab.heartbeats = None
    if config is None:
        return
    if config.link_interval_ms is not None:
        lab.heartbeats = HeartbeatGenerator(lab.fabric.fabric_ports(), config.link_interval_ms, RUN_DIR)
        lab.heartbeats.start()
    assert lab.controller is not None
    lab.failure_handler = start_failure_handling(lab.controller, config)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=15.0, help="quiet window per setting")
    ap.add_argument("--link-ms", type=float, nargs="+", default=[10.0, 20.0, 50.0],
                    help="link-heartbeat intervals to measure")
    ap.add_argument("--target", default="softswitch")
    ap.add_argument("--json", default="out/failover_load.json")
    args = ap.parse_args(argv)

    rows = []
    # the generator port exists only when the lab starts with link heartbeats: ask for them
    with Lab(fat_tree(4), target=args.target, progress=report.progress,
             link_heartbeat_ms=min(args.link_ms)) as lab:
        for name, config in _settings(args.link_ms):
            _use(lab, config)
            time.sleep(2.0 if config is None else config.grace_ms / 1000 + 1.0)   # settle first
            report.progress(f"{name}: {args.seconds:g} s quiet")
            rows.append({"setting": name, **_window(lab, args.seconds)})
        _use(lab, None)
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    print(report.table(
        ["setting", "switches", "controller", "generator", "machine", "heartbeat lateness (ms)", "dead ports"],
        [(r["setting"], pct(r["switches"]), pct(r["controller"]), pct(r["generator"]), pct(r["machine"]),
          r["lateness_ms"], "-" if r["dead_ports"] is None else r["dead_ports"]) for r in rows],
        title=f"\nFailure handling's cost on a quiet k=4 fat-tree ({args.target}; shares of {CORES} cores, "
              f"{args.seconds:g} s each; controller heartbeats every {HeartbeatConfig().interval_ms:g} ms)"))
    report.write_json(args.json, {"target": args.target, "cores": CORES, "seconds": args.seconds, "rows": rows})
    print(f"\nJSON: {Path(args.json).resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
