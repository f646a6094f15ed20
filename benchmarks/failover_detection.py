#!/usr/bin/env python3
"""How fast failure handling sees and routes around a core link going down (k=4 fat-tree).

For each round both veth ends of one core link are set down; the figures are times from that
moment (time.monotonic()): the port found dead (the monitor's verdict, worst of the two ends),
``port_status`` written (from then on the switch's data plane avoids the port: data-plane
failover), and the reroute finished (routes recomputed on the model and every switch
reconciled), plus the reroute's own duration. The link is then brought up again and the time to
the port alive again and the routes restored is reported too. Also the controller process's CPU
share while only heartbeats run. Measures; exits 1, naming why, when a round timed out (its step
named) or a port of another link was found dead meanwhile, so a script or CI sees it.

    .venv/bin/python -m benchmarks.failover_detection [--target softswitch] [--rounds 5]
        [--interval-ms 10] [--multiplier 3]

Goals (issue): data-plane failover < 50 ms at the default heartbeat settings; reroute < 500 ms.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


from aifabric.lab.cpu_meter import cpu_times  # noqa: E402
from aifabric.lab.failures import Failures
from aifabric.lab.lab import Lab  # noqa: E402
from controller.failover import HeartbeatConfig
from topologies.fabric import fat_tree

LINK = ("c0", "p0a0")


def _wait(predicate, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.005)


def _set(lab: Lab, up: bool) -> float:
    """The link cut (or back) as each target allows (`Failures`: on BMv2 an interface going down
    stops the whole switch); returns when its first end changed."""
    failures = Failures(lab)
    event = (failures.restore_link if up else failures.fail_link)(*LINK)
    return event.detail["first_end"]


def one_round(lab: Lab) -> dict[str, float]:
    handler, model = lab.failure_handler, lab.controller.model
    link = handler.link(*LINK)
    n_events, n_reroutes = len(handler.events), len(handler.reroutes)
    t0 = _set(lab, up=False)
    def dead_events():
        return [e for e in handler.events[n_events:] if not e.alive and (e.switch, e.port) in link.ends()]

    _wait(lambda: len(dead_events()) == 2, "both ends found dead and written")
    _wait(lambda: len(handler.reroutes) > n_reroutes and tuple(sorted(LINK)) in model.down_links(),
          "the reroute around the link")
    dead = dead_events()
    reroute = handler.reroutes[n_reroutes]
    out = {
        "dead_ms": 1000 * (max(e.decided for e in dead) - t0),
        "failover_ms": 1000 * (max(e.written or float("inf") for e in dead) - t0),
        "reroute_done_ms": 1000 * (reroute.finished - t0),
        "reroute_ms": 1000 * reroute.seconds,
    }
    lab.controller.wait_in_sync(30)
    n_events, n_reroutes = len(handler.events), len(handler.reroutes)
    t1 = _set(lab, up=True)
    _wait(lambda: handler.link_up(*LINK), "the link alive again")
    _wait(lambda: len(handler.reroutes) > n_reroutes and tuple(sorted(LINK)) not in model.down_links(),
          "the routes restored")
    _wait(lambda: sum(e.alive and (e.switch, e.port) in link.ends() for e in handler.events[n_events:]) == 2,
          "both ends written alive")
    alive = [e for e in handler.events[n_events:] if e.alive and (e.switch, e.port) in link.ends()]
    out["alive_ms"] = 1000 * (max(e.written or float("inf") for e in alive) - t1)
    out["restored_ms"] = 1000 * (handler.reroutes[n_reroutes].finished - t1)
    lab.controller.wait_in_sync(30)
    time.sleep(0.5)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="softswitch")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--interval-ms", type=float, default=HeartbeatConfig.interval_ms)
    ap.add_argument("--multiplier", type=int, default=HeartbeatConfig.multiplier)
    args = ap.parse_args()
    cfg = HeartbeatConfig(interval_ms=args.interval_ms, multiplier=args.multiplier)
    with Lab(fat_tree(4), target=args.target, failover=cfg) as lab:
        time.sleep(2.0)
        handler = lab.failure_handler
        c0, w0, m0 = os.times(), time.monotonic(), cpu_times()
        sent0, heard0, events0 = handler.heartbeats_sent, handler.heartbeats_heard, len(handler.events)
        time.sleep(5.0)
        c1, w1, m1 = os.times(), time.monotonic(), cpu_times()
        cpu = (c1.user + c1.system - c0.user - c0.system) / (w1 - w0)
        busy = 1 - (m1[1] - m0[1]) / max(1, m1[0] - m0[0])
        print(f"{args.target}: heartbeats every {cfg.interval_ms:g} ms x {cfg.multiplier} on "
              f"{len(handler.links) * 2} port ends; idle 5 s: {(handler.heartbeats_sent - sent0) / (w1 - w0):.0f} "
              f"sent/s, {(handler.heartbeats_heard - heard0) / (w1 - w0):.0f} heard/s, controller process CPU "
              f"{100 * cpu:.0f}% of one core, machine {100 * busy:.0f}% busy, "
              f"{len(handler.events) - events0} ports wrongly found dead")
        rows, failed = [], []
        for i in range(args.rounds):
            try:
                rows.append(one_round(lab))
            except TimeoutError as err:
                failed.append(f"round {i}: {err}")
                print(failed[-1])
        false_deaths = [e for e in handler.events if not e.alive
                        and (e.switch, e.port) not in handler.link(*LINK).ends()]
    print(f"{'ms after link down/up':<28}{'median':>8}{'max':>8}")
    for key in rows[0] if rows else []:
        values = [r[key] for r in rows]
        print(f"{key:<28}{statistics.median(values):>8.1f}{max(values):>8.1f}")
    print(f"ports of other links found dead meanwhile: {len(false_deaths)}")
    failed += [f"{e.switch} port {e.port} found dead, not on {LINK[0]}-{LINK[1]}" for e in false_deaths]
    if failed:
        print(f"FAILED ({len(failed)}): " + "; ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
