"""``aifabric demo``: a k-ary fat-tree that forwards, measured.

Brings the fabric up, checks that every host reaches every other over IPv4 and IPv6, runs a
short traffic mix (RoCEv2-style UDP flows across pods and one TCP flow), shows how the flows
spread over the core switches, prints a summary and optionally writes it as JSON.
"""
from __future__ import annotations

import time
from pathlib import Path

from aifabric.lab import checks, report, traffic
from aifabric.lab.lab import Lab
from controller.fabric_controller import Pipeline
from topologies.fabric import fat_tree


def run(k: int = 4, target: str = "auto", json_path: str | None = None, flows: int = 64,
        pipeline: Pipeline | None = None) -> int:
    fabric = fat_tree(k)
    say = report.progress
    figures: dict = {"topology": f"fat-tree k={k}", "target": target,
                     "switches": len(fabric.switches), "hosts": len(fabric.hosts)}
    t_start = time.monotonic()
    with Lab(fabric, target=target, pipeline=pipeline, progress=say) as lab:
        figures["target"] = lab.net.switches[0].target_kind
        figures["bring_up_s"] = {"targets": round(lab.bring_up.targets_s, 2),
                                 "program": round(lab.bring_up.program_s, 2),
                                 "total": round(lab.bring_up.total_s, 2)}
        figures["switch_rss_mib"] = checks.memory_mib(lab.target_pids())

        say("checking all-pairs reachability over IPv4")
        v4 = checks.all_pairs(lab, "ipv4", say)
        say("checking all-pairs reachability over IPv6")
        v6 = checks.all_pairs(lab, "ipv6", say)
        figures["reachability"] = {
            r.family: {"pairs": r.pairs, "reached": r.reached, "retried_alone": r.retried,
                       "failures": [f"{a}->{b}" for a, b in r.failures()]} for r in (v4, v6)}

        src, dst = fabric.hosts[0], fabric.hosts[-1]
        say(f"traffic mix: {flows} UDP flows (dport 4791) {src.name} -> {dst.name}")
        per_core, sent = checks.ecmp_over_cores(lab, flows=flows, count=10)
        tcp_src, tcp_dst = fabric.hosts[1], fabric.hosts[-2]
        say(f"one TCP flow {tcp_src.name} -> {tcp_dst.name} (iperf3, 2 s)")
        mbps = traffic.iperf_tcp(lab.host(tcp_src.name), lab.host(tcp_dst.name), str(tcp_dst.ip4.ip), seconds=2)
        figures["traffic"] = {"udp_flows": flows, "udp_datagrams": sent, "tcp_mbps": mbps,
                              "udp_packets_per_core": per_core,
                              "cores_used": sent if isinstance(sent, report.Failed)
                              else sum(1 for v in per_core.values() if v > 0)}
    figures["wall_s"] = round(time.monotonic() - t_start, 1)

    print(report.table(["family", "pairs", "reached", "of which retried alone"],
                       [(r.family, r.pairs, r.reached, r.retried) for r in (v4, v6)], title="\nReachability"))
    print(report.table(["core switch", "packets forwarded"], sorted(per_core.items()),
                       title=f"\nECMP through the core: {flows} UDP flows of 10 datagrams, pod 0 -> pod {k - 1}"))
    print(summary_table(figures))
    if json_path:
        report.write_json(json_path, figures)
        print(f"\nfigures written to {Path(json_path).resolve()}")
    ok = v4.reached == v4.pairs and v6.reached == v6.pairs
    if not ok:
        print("\nunreached pairs: " + ", ".join(f"{a}->{b}" for a, b in v4.failures() + v6.failures())[:2000])
    failed = report.say_failed(figures)
    return 0 if ok and not failed else 1


def summary_table(figures: dict) -> str:
    """The demo's summary; a failed measurement shows as ``failed (why)``."""
    b, t = figures["bring_up_s"], figures["traffic"]
    cores_used = t["cores_used"] if isinstance(t["cores_used"], report.Failed) \
        else f"{t['cores_used']} of {len(t['udp_packets_per_core'])}"
    return report.table(["figure", "value"], [
        ("target", figures["target"]),
        ("switches / hosts", f"{figures['switches']} / {figures['hosts']}"),
        ("bring-up: targets (s)", b["targets"]),
        ("bring-up: pipeline + routes (s)", b["program"]),
        ("memory per switch, mean (MiB)", figures["switch_rss_mib"]["mean"]),
        ("TCP flow (Mbit/s)", t["tcp_mbps"]),
        ("cores used", cores_used),
    ], title="\nSummary")

