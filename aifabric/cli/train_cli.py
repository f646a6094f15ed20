"""``aifabric train``: a training workload executed on a fabric (aifabric.experiments.train_runner):
the job of `aifabric workload show`'s options, its ranks placed on the --topo fabric's hosts,
scaled to the emulated links, --iterations iterations, on links limited to --rate (Mbit/s) under
a load-balancing mode (--lb; plb: the hosts' eBPF agents repath flows) and congestion feedback
(--congestion dcqcn: the agents' DCQCN paces them; both carry the collectives RoCEv2-like), its data-parallel all-reduces by ring or in the switches
(--collectives). A table per iteration (the slowest rank: step, compute, exposed communication,
idle, time per collective kind), the analytic estimate of the same iteration beside it, the link
load, a timeline PNG and JSON."""
from __future__ import annotations

import argparse
import os
from contextlib import nullcontext
import sys
import tempfile
from pathlib import Path

from aifabric.cli import topo_args, workload_cli
from aifabric.lab import report
from aifabric.workloads import WorkloadError, generate, place
from aifabric.cli.validate import fail_arg
from aifabric.experiments.background import background_flows
from aifabric.lab.links import LinkPlan, LinkRate, rate_arg
from emulation.p4switch import TARGETS, resolve_target
from aifabric.experiments.host_load_balance import DEFAULT_QPS
from aifabric.experiments.rank_processes import why_ended
from hostagent.congestion import SENDER_CONTROLS, parse_param, settings_control

DEFAULT_PNG = "out/train_timeline.png"
COLLECTIVES = ("ring", "in_network")
LB_MODES = ("ecmp", "spray", "flowlet", "te", "static", "disjoint", "qp-scaling", "plb")    # aifabric.experiments.fabric_conditions.LB_MODES
CONGESTION = ("none", "dcqcn", "timely", "swift")     # aifabric.experiments.fabric_conditions.CONGESTION
DEFAULT_RATE = LinkRate.parse("2M")


def cc_param_arg(text: str) -> tuple[str, float | int | None]:
    try:
        return parse_param(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    workload_cli.add_arguments(p, emulated_rate=False)       # --rate is the emulated links' rate
    p.add_argument("--iterations", type=int, default=2, help="iterations run (default %(default)s)")
    p.add_argument("--target", choices=TARGETS, default="softswitch", help="P4 target (default %(default)s)")
    p.add_argument("--collectives", choices=COLLECTIVES, default="ring",
                   help="the data-parallel all-reduces by ring, or summed in the switches (in_network: one host "
                        "must run no rank, for the fallback aggregator); every other collective by ring")
    p.add_argument("--lb", choices=LB_MODES, default="ecmp",
                   help="load-balancing mode of every switch (static: ECMP, the job's flows pinned evenly before it "
                        "starts; disjoint: ECMP, the ranks' ports chosen with the switches' hash so their flows "
                        "spread; qp-scaling: ECMP, every message cut over --qps source ports of the ranks' own (on the "
                        "Python host path); plb: ECMP, and the hosts' agents repath congested flows)")
    p.add_argument("--congestion", choices=CONGESTION, default="none",
                   help="congestion feedback: dcqcn (the hosts' agents set each flow's rate from CNPs), timely or "
                        "swift (the ranks' transport paces each flow and sets its window from its round trips, the "
                        "published defaults scaled to the links' rate and the fabric's longest path; on the Python "
                        "host path, the one that runs them), or none")
    p.add_argument("--cc-param", type=cc_param_arg, action="append", default=[], metavar="FIELD=VALUE",
                   help="with --congestion timely or swift, repeatable: a field of its parameters set over the scaled "
                        "defaults (hostagent/congestion: TimelyParams, SwiftParams), e.g. base_target_s=0.01, ai=2")
    p.add_argument("--qps", type=int, metavar="N",
                   help=f"with --lb qp-scaling: source ports (queue pairs) a peer pair's messages are cut over "
                        f"(default {DEFAULT_QPS}, NCCL's NCCL_IB_QPS_PER_CONNECTION)")
    p.add_argument("--rate", type=rate_arg, default=DEFAULT_RATE,
                   help="every link's rate per direction, the emulated link rate the workload is scaled to: "
                        "Mbit/s, or with a unit (2.5M, 500k, 100pps); default %(default)s")
    p.add_argument("--seed", type=int, default=0, help="moves the groups' UDP ports, so ECMP hashes them anew")
    p.add_argument("--fail", type=fail_arg, action="append", default=[], metavar="WHAT@WHEN[+DURATION]",
                   help="a failure during the job, repeatable: link:A-B, switch:NAME, rank:N (its process killed) or "
                        "host:NAME (its ranks killed, its links down; a restart moves its ranks to a spare host), "
                        "WHEN seconds after the first iteration begins or iN as iteration N begins, back DURATION s "
                        "later (else for good; a rank or a host only by --restarts), e.g. link:c0-p0a0@3+2, "
                        "switch:c1@i2, rank:5@i3, host:p1e0h1@i3; or random:MTBF@HORIZON[+DURATION], links between switches failing every MTBF s "
                        "on average in the first HORIZON s, drawn with --seed; with a link or switch failure the fabric "
                        "runs failure handling (heartbeats, data-plane failover, reroute)")
    p.add_argument("--restarts", type=int, default=0, metavar="K",
                   help="a failed attempt (a rank killed, a collective given up) has every rank stopped and the job "
                        "started again from its last checkpoint, up to K times, as an elastic launcher does "
                        "(default %(default)s: a failure ends the job)")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                   help="every rank saves its checkpoint as every Nth iteration begins; a restart goes on from "
                        "there (default %(default)s: none, a restart begins at iteration 0)")
    p.add_argument("--repath", action="store_true",
                   help="the ranks move a flow that loses packets to another path by themselves (another source "
                        "port, so ECMP hashes it elsewhere), before and apart from the fabric's reroute; the ranks "
                        "on the Python host path, the one that repaths")
    p.add_argument("--lossless", action="store_true",
                   help="the ranks' packets in the lab's RoCE class (3, DSCP 26), lossless for the job: the switches "
                        "pause instead of dropping and the ranks hold their sends while paused (softswitch; the "
                        "ranks on the Python host path, the one that honours PFC)")
    p.add_argument("--no-pfc", action="store_true",
                   help="with --lossless: the ranks' class without PFC (it drops when full, as class 0 does), "
                        "to tell the class's priority from PFC's part")
    p.add_argument("--background", type=float, metavar="SHARE",
                   help="storage-like traffic beside the job: from every host that runs no rank, a UDP flow of class "
                        "0 to a rank's host at SHARE (0-1] of the link rate, for as long as the job runs")
    p.add_argument("--png", metavar="PATH", help=f"the timeline (default {DEFAULT_PNG})")


def prepare(args: argparse.Namespace):
    """What a run needs before anything is brought up: (job, fabric, placement, scale, workload);
    WorkloadError or ValueError naming what does not fit."""
    defaults = argparse.ArgumentParser()
    workload_cli.add_arguments(defaults)
    args.emulated_mbps = LinkPlan(args.rate).bits_per_s / 1e6
    job = workload_cli.job_of(args, defaults.parse_args(["--preset", "tiny"]))
    fabric = topo_args.fabric_of(args)
    placement = place(fabric, job.parallelism)
    scale = workload_cli.scale_of(args, job)
    workload = generate(job, scale, placement)
    from aifabric.experiments.failure_schedule import planned_failures
    args.fail = planned_failures(args.fail, fabric, args.seed, job.parallelism.world)  # random ones drawn, each checked
    if args.restarts < 0 or args.checkpoint_every < 0:
        raise ValueError(f"--restarts {args.restarts} and --checkpoint-every {args.checkpoint_every}: 0 or more")
    if args.checkpoint_every and not args.restarts:
        raise ValueError("--checkpoint-every: checkpoints are for a restart; give --restarts too")
    lost = [f for f in args.fail if f.kind == "host"]
    if lost:
        if args.lb in ("plb", "disjoint", "qp-scaling") or args.congestion == "dcqcn" or args.lossless:
            raise ValueError(f"--fail {lost[0].text}: a lost host's ranks move to a spare host, which has no host agent, "
                             f"lossless class or hash-chosen ports for them: not with --lb {args.lb}, --congestion "
                             f"{args.congestion} or --lossless")
        needed = job.parallelism.world + len(lost) + (args.collectives == "in_network")
        if needed > len(fabric.hosts):
            raise ValueError(f"--fail {lost[0].text}: {len(lost)} lost host(s) need as many spares beside the "
                             f"{job.parallelism.world} ranks' hosts{' and the fallback aggregator' if args.collectives == 'in_network' else ''}; "
                             f"{fabric.describe()} has {len(fabric.hosts)} hosts")
    if args.background is not None:
        background_flows([h.name for h in fabric.hosts], list(placement.hosts), args.rate, args.background)
    if args.no_pfc and not args.lossless:
        raise ValueError("--no-pfc goes with --lossless (the ranks' class, without PFC)")
    if args.lb == "plb" and args.congestion in SENDER_CONTROLS:
        raise ValueError(f"--congestion {args.congestion} runs in the ranks' own transport: not with the host agents' "
                         "RoCEv2 framing (--lb plb)")
    if args.cc_param:
        if args.congestion not in SENDER_CONTROLS:
            raise ValueError(f"--cc-param sets a field of the ranks' own control: with --congestion "
                             f"{' or '.join(SENDER_CONTROLS)}, not {args.congestion}")
        from aifabric.experiments.fabric_conditions import transport_cc
        from hostagent.collectives.reliable import DATA_FRAME_BYTES
        # as the ranks will build it (the fabric's own RTT: scaled defaults the fields must fit)
        settings_control(transport_cc(fabric, args.rate, args.congestion, dict(args.cc_param)), DATA_FRAME_BYTES)
    if args.qps is not None and (args.lb != "qp-scaling" or args.qps < 1):
        raise ValueError(f"--qps {args.qps}: a number >= 1 of queue pairs, with --lb qp-scaling")
    if args.lb == "qp-scaling" and (args.congestion == "dcqcn" or args.repath):
        raise ValueError("--lb qp-scaling spreads the ranks' own flows over source ports of their own: not with the "
                         "host agents' RoCEv2 framing (--congestion dcqcn) nor --repath")
    if args.lb == "disjoint" and args.congestion == "dcqcn":
        raise ValueError("--lb disjoint: the ranks' own ports are not offered with the host agents' RoCEv2 framing "
                         "(--congestion dcqcn)")
    if args.repath and (args.lb == "plb" or args.congestion == "dcqcn"):
        raise ValueError("--repath moves the ranks' own flows: not with the host agents' RoCEv2 framing "
                         "(--lb plb, --congestion dcqcn), whose flows PLB moves")
    if args.lossless and (args.lb == "plb" or args.congestion == "dcqcn"):
        raise ValueError("--lossless: the ranks' traffic class is not offered with the host agents' RoCEv2 framing "
                         "(--lb plb, --congestion dcqcn)")
    if args.lossless and resolve_target(args.target)[0] != "softswitch":
        from controller.lossless.target import BMV2_PFC
        raise ValueError(f"--lossless: {BMV2_PFC}")
    if args.collectives == "in_network" and job.parallelism.world >= len(fabric.hosts):
        raise ValueError(f"--collectives in_network needs a host that runs no rank: {fabric.describe()} has "
                         f"{len(fabric.hosts)} hosts for {job.parallelism.world} ranks")
    return job, fabric, placement, scale, workload


def run(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print("aifabric: error: must run as root (network namespaces, raw sockets)", file=sys.stderr)
        return 2
    from aifabric.experiments.calibration import calibrate, group_sizes
    from aifabric.experiments.background import running
    from aifabric.experiments.fabric_conditions import FabricConditions
    from aifabric.experiments.failure_schedule import FOR_GOOD, FailureSchedule
    from aifabric.experiments.train_runner import (disjoint_ports, draw_timeline, qp_ports_for, run_workload,
                                                   workload_flows)
    from aifabric.lab.failures import Failures
    from aifabric.lab.lab import Lab
    from controller.aggregation import JobManager
    from controller.failover import HeartbeatConfig
    from controller.failover.config import link_interval_for
    from aifabric.lab.lossless import RDMA_PRIORITY, rdma_classes

    try:
        job, fabric, placement, scale, workload = prepare(args)
    except (WorkloadError, ValueError) as e:
        print(f"aifabric: error: {e}", file=sys.stderr)
        return 2
    if args.fail:
        report.progress("failures planned: " + "; ".join(f.describe() for f in args.fail))
    failover = (HeartbeatConfig(link_interval_ms=link_interval_for(resolve_target(args.target)[0]))
                if any(f.kind not in FOR_GOOD for f in args.fail) else None)   # a lost rank or host: the job's to handle
    with tempfile.TemporaryDirectory(prefix="aifabric-train-") as tmp, \
            Lab(fabric, target=args.target, progress=report.progress, failover=failover,
                lossless=rdma_classes() if args.lossless else None) as lab:
        conditions = FabricConditions(lab, args.rate)
        qps = conditions.queue_pairs(args.lb, args.qps)
        before = class_totals(lab) if args.lossless else None
        ranks = list(placement.hosts)
        calibration = (calibrate(lab, conditions.plan, ranks, sizes=group_sizes(workload))
                       if len(ranks) > 1 else None)
        if calibration is not None:
            report.progress(calibration.describe())
        manager = JobManager(lab.controller) if args.collectives == "in_network" else None
        background = (running(lab, background_flows([h.name for h in fabric.hosts], ranks, args.rate,
                                                    args.background))
                      if args.background is not None else nullcontext())
        with conditions.load_balancing(args.lb, workload_flows(workload, args.seed)), background:
            run_ = run_workload(lab, workload, args.iterations, Path(tmp) / "plan.json", manager=manager,
                                link=conditions.plan, seed=args.seed,
                                host_agent=conditions.host_agent(args.lb, args.congestion, args.seed),
                                costs=calibration.costs if calibration else None,
                                failures=FailureSchedule(Failures(lab), args.fail) if args.fail else None,
                                klass=RDMA_PRIORITY if args.lossless else None, pfc=not args.no_pfc,
                                ports=disjoint_ports(lab.controller, workload, args.seed) if args.lb == "disjoint" else None,
                                repath=args.repath, cc=conditions.transport_cc(args.congestion, dict(args.cc_param)),
                                qps=qps, qp_ports=qp_ports_for(lab.controller, workload, qps, args.seed) if qps > 1 else None,
                                checkpoint_every=args.checkpoint_every, restarts=args.restarts)
            pauses = lossless_figures(lab, before) if args.lossless else None
    if not run_.ok:
        if run_.failures or run_.restarts:
            print(failure_table(run_))
        print("aifabric: training failed: " + "; ".join(run_.errors), file=sys.stderr)
        return 1
    print(render(run_, job, fabric, scale, args))
    if pauses is not None:
        print(f"{'lossy' if args.no_pfc else 'lossless'} class {RDMA_PRIORITY}: {pauses['pause_sent']} PAUSE frames, neighbours held paused "
              f"{pauses['pausing_s']:.2f} s in all, lossless drops {pauses['lossless_drops']}, queue drops "
              f"{pauses['drops']}; the ranks' sends held {run_.paused_s:.2f} s in all")
    png = args.png or DEFAULT_PNG
    draw_timeline(png, run_)
    print(f"timeline written to {Path(png).resolve()}")
    if args.json:
        report.write_json(args.json, {**workload.job.to_dict(), "scale": scale.to_dict(), "collectives": args.collectives,
                                      "calibration": calibration.to_dict() if calibration else None,
                                      "fail": [f.text for f in args.fail], "restarts_allowed": args.restarts,
                                      "checkpoint_every": args.checkpoint_every, "repath": args.repath, "lossless": args.lossless,
                                      "pfc": args.lossless and not args.no_pfc,
                                      "background": args.background,
                                      "pauses": pauses,
                                      "lb": args.lb, "congestion": args.congestion, "cc_params": dict(args.cc_param),
                                      "qps": qps, "rate": args.rate, "seed": args.seed, **run_.summary(),
                                      "ranks": run_.reports})
        print(f"figures written to {Path(args.json).resolve()}")
    return 0


def render(run_, job, fabric, scale, args) -> str:
    """The iteration table, the estimate beside the measurement, link load and where the sums were made."""
    title = (f"{job.shape.name} on {fabric.describe()}, {job.parallelism.world} ranks, {args.lb}, "
             f"congestion feedback {args.congestion}, "
             f"DP all-reduce {args.collectives}, links {args.rate}; emulated time "
             f"(x{scale.time_dilation:.3g} the real one); the slowest rank")
    out = [report.table(["iteration", "step (s)", "compute (s)", "exposed comm (s)", "idle (s)", "comm by kind (s)"],
                        run_.iteration_rows(), title=title)]
    out.append(report.table(["iteration", "step (s)", "link-bound (s)", "measured / link-bound", "latency-aware (s)",
                             "measured / latency-aware", "exposed comm (s)", "estimate exposed (s)"],
                            run_.comparison_rows(),
                            title="Measured against the analytic estimates (aifabric/workloads/estimate.py): link-bound, "
                                  "and latency-aware with the calibrated costs (aifabric/workloads/latency.py)"))
    out.append(report.table(["collective kind", "measured (s)", "link-bound (s)", "measured / link-bound",
                             "latency-aware (s)", "measured / latency-aware"], run_.kind_rows(),
                            title="Time per collective kind in the last iteration (the rank that spent the most)"))
    load = run_.link_load
    out.append(f"link load: busiest {load['busiest']} {load['busiest_packets']} packets "
               f"({100 * load['busiest_share']:.0f}% of its bits over the run); fabric links: "
               f"{load['fabric_directions_used']} of {load['fabric_directions']} directions used, mean "
               f"{100 * load['fabric_mean_share']:.0f}%, max/mean {load['fabric_imbalance']}; CPU {100 * run_.cpu_busy:.0f}% busy")
    if run_.agents:
        a = run_.agents
        out.append(f"host agents: {a.get('repaths', 0)} repaths in {a.get('congested_rounds', 0)} congested of "
                   f"{a.get('rounds', 0)} PLB rounds; CNPs {a.get('cnps_sent', 0)} sent, {a.get('cnps_received', 0)} "
                   f"received; {a.get('rate_updates', 0)} rate updates")
    if run_.cc is not None:
        cc = run_.cc
        params = "".join(f", {k}={v}" for k, v in args.cc_param)
        out.append(f"congestion control {cc['name']} in the ranks' transport (defaults scaled to the fabric{params}): "
                   f"{cc['samples']:.0f} round trips taken, "
                   f"{cc['losses']:.0f} timeouts told, sends waited {cc['paced_s']:.2f} s for their pacing in all")
    if args.repath:
        out.append(f"repath: the ranks' flows moved to another path {run_.repaths} times; "
                   f"{run_.resent} packets resent")
    if run_.failures or run_.restarts:
        out.append(failure_table(run_))
    if args.collectives == "in_network":
        out.append(f"in the switches: {'yes' if run_.in_network else 'NO (slot pool full: on the aggregator)'}; "
                   f"chunks completed {run_.agg_ops.get('completed', 0)}, fallback aggregator packets "
                   f"{run_.server_stats.get('packets_in', 'unknown')}")
    return "\n".join(out)


def failure_table(run_) -> str:
    """Each failure event of the run, the iteration it hit, and per failure the iterations its
    outage overlapped and the time they lost."""
    lost = run_.time_lost
    rows = []
    for e in run_.failures:
        cost = lost.get(e["failure"], {}) if e["what"] == "down" else {}
        rows.append((e["failure"], e["what"], e["at_s"] if e["at_s"] is not None else "-",
                     e["iteration"] if e["iteration"] is not None else "none (between or after iterations)",
                     ", ".join(map(str, cost.get("iterations", []))) or "-",
                     cost.get("lost_s") if cost.get("lost_s") is not None else "-", e["error"] or ""))
    table = report.table(["failure", "event", "at (s)", "iteration then", "iterations overlapped", "time lost (s)",
                          "error"], rows,
                         title="Failures during the job (time lost: the overlapped iterations' time beyond the median "
                               "of those no outage overlapped)")
    if run_.restarts:
        table += "\n" + report.table(
            ["restart", "why the attempt before ended", "hosts replaced", "ranks warm", "resumed from iteration",
             "iterations done again", "time lost (s)", "of it the launch (s)"],
            [(n + 1, why_ended(r["errors"]), ", ".join(f"{a} by {b}" for a, b in r["replaced"].items()) or "-",
              r["warm_ranks"], r["resumed_from"], ", ".join(map(str, r["redone"])) or "-",
              _or_dash(r["lost_s"]), _or_dash(r["launch_s"])) for n, r in enumerate(run_.restarts)],
            title="Restarts from the checkpoint (time lost: from the failed attempt's start of the iteration resumed "
                  "from to the next attempt's)")
    ratio = run_.effective_ratio
    return table + ("\neffective training time ratio: " + (f"{ratio:.3f} (the iterations at the clean median over "
                                                           f"their wall time)" if ratio is not None
                                                           else "unknown (no iteration free of an outage)"))


def _or_dash(value):
    return value if value is not None else "-"


def class_totals(lab) -> dict:
    """The RoCE class's counters over every switch now (aifabric.experiments.lossless_scenes.totals)."""
    from aifabric.experiments.lossless_scenes import totals
    lab.lossless.poller.poll_once()
    return totals(lab.lossless.poller.snapshot())


def lossless_figures(lab, before: dict) -> dict:
    """What the class's switches did since ``before``: PAUSE frames, time held paused, drops."""
    from aifabric.experiments.lossless_scenes import delta
    return delta(before, class_totals(lab))
