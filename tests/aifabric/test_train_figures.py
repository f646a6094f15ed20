"""The figures `aifabric train` and `aifabric bench train` report, on hand-made inputs: link load
from per-direction packet counts, and the bench's medians over seeds (a failed seed named, not
dropped). The CLI offers the load-balancing modes the lab sets."""
from __future__ import annotations

import random

import pytest

from aifabric.experiments.link_load import LinkLoad
from controller.fabric_controller import PortCounter


def test_link_load_names_the_busiest_direction_and_the_fabric_imbalance():
    frame = 1476                        # + 24 bytes of Ethernet overhead: 1500 bytes, 12,000 bits a frame
    packets = {"e0->h0": 500, "e0->a0": 300, "a0->e0": 100, "a0->c0": 200, "c0->a0": 0}
    sent = {k: PortCounter(n, n * frame) for k, n in packets.items()}
    load = LinkLoad(sent, seconds=10.0, bits_per_s=1.2e6, switches=frozenset({"e0", "a0", "c0"}))
    s = load.summary()
    assert s["busiest"] == "e0->h0" and s["busiest_share"] == 0.5          # 500 frames of 10 s x 100 frames/s
    # fabric directions (switch to switch): 300, 100, 200, 0 -> mean 150, max/mean 2
    assert s["fabric_packets"] == 600 and s["fabric_directions"] == 4 and s["fabric_directions_used"] == 3
    assert s["fabric_mean_share"] == 0.15 and s["fabric_imbalance"] == 2.0


def _run(topo, mode, coll, seed, step, ok=True):
    base = {"topology": topo, "mode": mode, "collectives": coll, "seed": seed}
    if not ok:
        return {**base, "ok": False, "error": "rank 3 (h3): PeerSilent"}
    return {**base, "ok": True, "step_s": step, "exposed_comm_s": step / 2, "estimate_step_s": 2.0,
            "busiest_share": 0.5, "fabric_imbalance": 1.5, "cpu_busy": 0.6, "agg_completed": 0}


def test_bench_medians_over_seeds_and_failed_seeds_named():
    from aifabric.experiments.train_bench import summarise
    runs = [_run("fattree", "ecmp", "ring", s, step) for s, step in enumerate((3.0, 1.0, 1.5))]
    runs += [_run("fattree", "spray", "ring", 0, 5.0), _run("fattree", "spray", "ring", 1, 0, ok=False)]
    runs += [_run("rail", "ecmp", "ring", 0, 0, ok=False)]
    rows = {(r["topology"], r["mode"]): r for r in summarise(runs)}
    assert rows["fattree", "ecmp"]["step_s"] == 1.5 and rows["fattree", "ecmp"]["exposed_comm_s"] == 0.75
    assert rows["fattree", "spray"]["failed"] == 1 and rows["fattree", "spray"]["step_s"] == 5.0
    assert rows["fattree", "spray"]["errors"] == ["rank 3 (h3): PeerSilent"]
    assert rows["rail", "ecmp"]["step_s"] is None and rows["rail", "ecmp"]["errors"]


def test_bench_keeps_the_ranks_classes_apart_and_names_them():
    from aifabric.experiments.train_bench import TrainBenchPlan, render, summarise
    from aifabric.workloads import Scale
    runs = [{**_run("fattree", "ecmp", "ring", s, step), "classes": cls}
            for s, (step, cls) in enumerate(((2.0, "none"), (3.0, "lossless"), (4.0, "lossless")))]
    rows = {r["classes"]: r for r in summarise(runs)}
    assert rows["none"]["step_s"] == 2.0 and rows["lossless"]["step_s"] == 3.5 and rows["lossless"]["runs"] == 2
    table = render(TrainBenchPlan(classes=("none", "lossless"), background=0.5), Scale(0.01), list(rows.values()))
    assert "ranks' class" in table and "lossless" in table and "class-0 flows at 0.5 of a link" in table


def test_the_cli_offers_the_modes_the_lab_sets():
    from aifabric.cli.train_cli import LB_MODES as cli_modes
    from aifabric.experiments.fabric_conditions import LB_MODES
    assert cli_modes == LB_MODES


def test_a_seed_whose_ports_would_meet_the_aggregation_port_is_refused(tmp_path):
    from aifabric.experiments import train_runner
    from aifabric.workloads import Job, Parallelism, Scale, generate, place, preset
    from topologies.fabric import fat_tree

    fabric = fat_tree(4)
    job = Job(preset("tiny"), Parallelism(dp=2))
    workload = generate(job, Scale(1e3), place(fabric, job.parallelism))

    class NoLab:                       # refused before anything touches a fabric
        def __init__(self):
            self.fabric = fabric
    with pytest.raises(ValueError, match="aggregation port 48864"):
        train_runner.run_workload(NoLab(), workload, 1, tmp_path / "plan.json", seed=9)


def test_the_first_retransmission_timeout_covers_every_window_a_rank_sends_at_once():
    """DP alone: one stream of communication, one window's time; DP x TP x PP: three streams
    (their groups send at once on the rank's host link), three windows' time."""
    from aifabric.experiments import train_runner
    from aifabric.experiments.collectives_bench import min_rto_s
    from aifabric.lab.links import LinkPlan, LinkRate
    from aifabric.workloads import Job, Parallelism, Scale, generate, preset

    link = LinkPlan(LinkRate.parse("4M"))
    streams = {}
    for name, par in {"dp": Parallelism(dp=8), "3d": Parallelism(dp=2, tp=2, pp=2, micro_batches=2)}.items():
        workload = generate(Job(preset("tiny"), par), Scale(1e3))
        streams[name] = train_runner.comm_streams(workload)
        rto = train_runner.timeouts_for(link, streams[name])["rto_s"]
        assert rto == pytest.approx(min_rto_s(link, train_runner.RANK_WINDOW * streams[name]))
    assert streams == {"dp": 1, "3d": 3}


def test_the_collectives_sweep_times_out_after_two_windows_of_64(monkeypatch):
    """`bench collectives` and `bench fidelity` run their groups with the library's window (64) and
    a first timeout of two windows' time (ECMP may queue two of the group's flows on one link);
    with one window of 32, ring all_reduce of 512 KiB among 8 resent 2,010 packets that had arrived."""
    from aifabric.experiments import collectives_bench
    from aifabric.lab.links import LinkPlan, LinkRate

    class Captured(Exception):
        pass

    def run_group(lab, hosts, calls, elements, **options):
        raise Captured(options)
    monkeypatch.setattr(collectives_bench, "run_group", run_group)
    plan = LinkPlan(LinkRate.parse("4M"))
    with pytest.raises(Captured) as got:
        collectives_bench.measure(None, ["h1", "h2"], ["all_reduce"], [1 << 19], plan=plan)
    options = got.value.args[0]
    assert options["window"] == 64
    assert options["extra_args"] == ["--rto", f"{plan.rate.seconds(collectives_bench.DATA_FRAME, 128):.3f}"]


def test_a_resumed_run_is_compared_step_by_step_and_its_lost_time_counted():
    """A run resumed from step 40 is held against the reference's steps 40 on (not 0 on), and the
    crash cost is the failed attempt's time less the 40 steps it kept."""
    from aifabric.experiments.demo_train import curve_gaps, lost_seconds
    from aifabric.experiments.train_lab import TrainRun

    reference = [{"step": t, "loss": 1.0 / (t + 1)} for t in range(60)]
    steps = [{"step": t, "loss": 1.0 / (t + 1), "step_s": 0.1} for t in range(40, 60)]
    run = TrainRun("ring", ["h0", "h1"], reports=[{"first_step": 40, "steps": steps}] * 2,
                   restarts=[{"errors": [], "wall_s": 7.0, "resumed_from": 40}])
    assert run.first_step == 40
    assert curve_gaps(run.steps(), reference, "loss") == 0.0
    assert lost_seconds(run) == pytest.approx(7.0 - 40 * 0.1)


def _workload(dp: int, tp: int, pp: int):
    from aifabric.workloads import Scale, generate, place
    from aifabric.workloads.job import Job
    from aifabric.workloads.parallelism import Parallelism
    from aifabric.workloads.presets import preset
    from topologies.fabric import fat_tree
    job = Job(preset("tiny"), Parallelism(dp=dp, tp=tp, pp=pp, micro_batches=2))
    return generate(job, Scale(0.01), place(fat_tree(4), job.parallelism))


def test_a_workloads_flows_are_its_groups_rings_on_their_ports():
    """What static load balancing pins: every group's ring (member to next, its port as the
    runner gives it: BASE_PORT + SEED_PORTS x seed + the group's index), both ways in a pair."""
    from aifabric.experiments.train_runner import BASE_PORT, SEED_PORTS, groups_of, workload_flows
    workload = _workload(2, 2, 2)
    flows = workload_flows(workload, seed=3)
    host = workload.placement.host
    groups = groups_of(workload)
    for index, group in enumerate(groups):
        port = BASE_PORT + SEED_PORTS * 3 + index
        mine = {(f.src, f.dst) for f in flows if f.sport == f.dport == port}
        ring = {(host(group[k]), host(group[(k + 1) % len(group)])) for k in range(len(group))}
        if len(group) == 2:
            ring |= {(b, a) for a, b in ring}
        assert mine == {(a, b) for a, b in ring if a != b}, (group, mine)
    assert len(flows) == len({(f.src, f.dst, f.sport) for f in flows})


def test_disjoint_ports_spread_a_workloads_flows_as_well_as_free_paths_would():
    """DP2 x TP2 x PP2 on the k=4 fat-tree (32 flows over two pods): with a port a group (seed 1)
    a link carries 5 of them; with each member's port chosen with the hash, the busiest carries
    no more than the best placement on the routes' paths gives (`spread.balanced` over them, what
    static pins). Every rank's ports distinct, all below the aggregation port."""
    from aifabric.experiments.train_runner import disjoint_ports, groups_of, workload_flows
    from controller.fabric_controller import FabricController, Pipeline
    from controller.load_balance.disjoint import link_loads
    from controller.load_balance.hash_paths import HashPaths
    from controller.load_balance.spread import balanced, link_loads_of
    from controller.paths import installed_paths
    from hostagent.collectives.aggregation.protocol import AGG_UDP_PORT
    workload = _workload(2, 2, 2)
    ctl = FabricController(_fat_tree(), Pipeline.from_build_dir())
    try:
        flows = workload_flows(workload, seed=1)
        free = [[(i, tuple((a.switch, b.switch) for a, b in zip(p, p[1:])))
                 for i, p in enumerate(installed_paths(ctl.fabric, ctl.forwarding, f.src, f.dst))] for f in flows]
        best = max(link_loads_of(links for _, links in balanced(free, [None] * len(flows))).values())
        ports = disjoint_ports(ctl, workload, seed=1)
        with HashPaths.of(ctl) as paths:
            shared = max(link_loads(paths, flows).values())
            spread = max(link_loads(paths, workload_flows(workload, seed=1, ports=ports)).values())
    finally:
        ctl.close()
    assert spread == best < shared, (spread, best, shared)
    by_rank: dict[int, list[int]] = {}
    for group, mine in zip(groups_of(workload), ports):
        for rank, port in zip(group, mine):
            by_rank.setdefault(rank, []).append(port)
    assert all(len(set(p)) == len(p) and max(p) < AGG_UDP_PORT for p in by_rank.values())


def _fat_tree():
    from topologies.fabric import fat_tree
    return fat_tree(4)


def test_disjoint_ports_keep_the_groups_that_carry_most_apart():
    """DP4 x TP2: the data-parallel rings carry most of the bytes. With flows weighted by their
    group's bytes, no link carries two of those rings' flows (counted alike, a barrier's flow
    weighed as much, and two of them shared a link: `bench train`'s step stayed ECMP's)."""
    from collections import Counter

    from aifabric.experiments.train_runner import _talking, disjoint_ports, group_bytes
    from controller.fabric_controller import FabricController, Pipeline
    from controller.load_balance.hash_paths import FiveTuple, HashPaths
    workload = _workload(4, 2, 1)
    hosts, groups, pairs = _talking(workload)
    weights = group_bytes(workload, groups)
    heaviest = {i for i, w in enumerate(weights) if w == max(weights)}
    assert heaviest == {i for i, g in enumerate(groups) if len(g) == 4}       # the two DP rings
    ctl = FabricController(_fat_tree(), Pipeline.from_build_dir())
    try:
        ports = disjoint_ports(ctl, workload, seed=1)
        with HashPaths.of(ctl) as paths:
            loads: Counter = Counter()
            for i, a, b in pairs:
                if i in heaviest and hosts[a] != hosts[b]:
                    loads.update(paths.links(FiveTuple(hosts[a], hosts[b], ports[i][groups[i].index(a)],
                                                       ports[i][groups[i].index(b)])))
    finally:
        ctl.close()
    assert max(loads.values()) == 1, loads.most_common(3)


@pytest.mark.parametrize("dp, tp, pp", [(8, 1, 1), (2, 2, 2)], ids=["dp8", "dp2-tp2-pp2"])
def test_queue_pairs_to_a_peer_take_as_many_paths_as_the_fabric_has(dp, tp, pp):
    """qp-scaling's ports (`qp_ports_for`, QPS 4 a peer): every flow of a rank to its peer takes
    min(4, the paths the fabric has between their hosts) distinct paths over its queue pairs (the
    fabric's hash, HashPaths, which the switches' choices are checked against), where ports the
    kernel gives land on fewer for some; a host's ports are all distinct and stay below the
    aggregation port."""
    from aifabric.experiments.train_runner import _ports, _talking, base_port, qp_ports_for
    from controller.fabric_controller import FabricController, Pipeline
    from controller.load_balance.hash_paths import FiveTuple, HashPaths
    from controller.paths import installed_paths
    from hostagent.collectives.aggregation.protocol import AGG_UDP_PORT
    qps = 4
    workload = _workload(dp, tp, pp)
    hosts, groups, pairs = _talking(workload)
    own = _ports(groups, 1, None)
    ctl = FabricController(_fat_tree(), Pipeline.from_build_dir())
    try:
        chosen = qp_ports_for(ctl, workload, qps, seed=1)
        rng = random.Random(1)
        with HashPaths.of(ctl) as paths:
            short, short_random = [], 0
            for i, a, b in pairs:
                if hosts[a] == hosts[b]:
                    continue
                fabric_has = len(installed_paths(ctl.fabric, ctl.forwarding, hosts[a], hosts[b]))
                sports = [own[(i, a)], *chosen[i][groups[i].index(a)]]
                taken = {paths.links(FiveTuple(hosts[a], hosts[b], sp, own[(i, b)])) for sp in sports}
                if len(taken) != min(qps, fabric_has):
                    short.append((i, a, b, len(taken), fabric_has))
                drawn = [own[(i, a)], *(rng.randint(32768, 60999) for _ in range(qps - 1))]
                short_random += len({paths.links(FiveTuple(hosts[a], hosts[b], sp, own[(i, b)]))
                                     for sp in drawn}) < min(qps, fabric_has)
    finally:
        ctl.close()
    assert not short, short
    assert short_random > 0, "ports drawn at random reached every path too: the check tells nothing"
    by_host: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        for k, r in enumerate(g):
            by_host.setdefault(hosts[r], []).extend([own[(i, r)], *chosen[i][k]])
    assert all(len(set(p)) == len(p) and max(p) < AGG_UDP_PORT and min(p) >= base_port(1)
               for p in by_host.values()), by_host


@pytest.mark.parametrize("flags", [["--lb", "plb"], ["--congestion", "dcqcn"]])
def test_repath_is_refused_where_the_host_agents_move_the_flows(flags):
    from aifabric.cli import build_parser, train_cli
    train = ["train", "--preset", "tiny", "--dp", "2", "--repath"]
    with pytest.raises(ValueError, match="--repath moves the ranks' own flows"):
        train_cli.prepare(build_parser().parse_args(train + flags))
    train_cli.prepare(build_parser().parse_args(train))     # alone, it is taken


@pytest.mark.parametrize("control", ["timely", "swift"])
def test_a_transport_control_is_refused_where_the_host_agents_frame_the_flows(control):
    from aifabric.cli import build_parser, train_cli
    train = ["train", "--preset", "tiny", "--dp", "2", "--congestion", control]
    with pytest.raises(ValueError, match=f"--congestion {control} runs in the ranks' own transport"):
        train_cli.prepare(build_parser().parse_args(train + ["--lb", "plb"]))
    train_cli.prepare(build_parser().parse_args(train))     # alone, it is taken


def test_the_transport_controls_are_scaled_to_the_links_and_the_fabrics_longest_path():
    """A fat tree's longest host-to-host path is six links; a leaf-spine's four."""
    from types import SimpleNamespace

    from aifabric.experiments.fabric_conditions import FabricConditions
    from aifabric.lab.links import LinkPlan, LinkRate
    from hostagent.collectives.reliable import ACK_FRAME_BYTES, DATA_FRAME_BYTES
    from topologies.fabric import leaf_spine
    rate = LinkRate.parse("2M")
    for fabric, links in ((_fat_tree(), 6), (leaf_spine(2, 2, 2), 4)):
        conditions = SimpleNamespace(lab=SimpleNamespace(fabric=fabric), plan=LinkPlan(rate))
        cc = FabricConditions.transport_cc(conditions, "swift")
        assert cc.name == "swift" and cc.link_bps == pytest.approx(2e6)
        assert cc.base_rtt_s == pytest.approx(links * (DATA_FRAME_BYTES + ACK_FRAME_BYTES) * 8 / 2e6)
        assert FabricConditions.transport_cc(conditions, "dcqcn") is None


@pytest.mark.parametrize("flags", [["--congestion", "dcqcn"], ["--repath"]])
def test_queue_pairs_are_refused_where_the_flows_are_framed_or_moved_otherwise(flags):
    from aifabric.cli import build_parser, train_cli
    train = ["train", "--preset", "tiny", "--dp", "2", "--lb", "qp-scaling"]
    with pytest.raises(ValueError, match="--lb qp-scaling spreads the ranks' own flows"):
        train_cli.prepare(build_parser().parse_args(train + flags))
    train_cli.prepare(build_parser().parse_args(train))     # alone, it is taken


@pytest.mark.parametrize("congestion, dropped", [("dcqcn", {"disjoint", "qp-scaling"}), ("swift", {"plb"}),
                                                 ("none", set())])
def test_bench_train_skips_the_modes_its_congestion_feedback_cannot_run_beside(congestion, dropped, capsys):
    from aifabric.cli import build_parser
    from aifabric.experiments import train_bench
    from aifabric.experiments.fabric_conditions import LB_MODES
    plan = train_bench.plan_of(build_parser().parse_args(["bench", "train", "--congestion", congestion]))
    assert set(plan.modes) == set(LB_MODES) - dropped
    said = {line.split(":")[0].removeprefix("skipping mode ") for line in capsys.readouterr().out.splitlines()
            if line.startswith("skipping mode ")}
    assert said == dropped


@pytest.mark.parametrize("flags, error", [
    (["--congestion", "none", "--cc-param", "ai=2"], "--cc-param sets a field of the ranks' own control"),
    (["--congestion", "swift", "--cc-param", "t_low_s=0.01"], "SwiftParams has no field t_low_s"),
    (["--congestion", "timely", "--cc-param", "beta=3"], "beta"),
    # TIMELY's T_low scaled to the fat tree's six-link RTT (36 ms at 2 Mbit/s) is 90 ms: below it, refused
    (["--congestion", "timely", "--cc-param", "t_high_s=0.05"], "t_high_s = 0.05: must be > t_low_s"),
    (["--lb", "ecmp", "--qps", "2"], "--qps 2: a number >= 1 of queue pairs, with --lb qp-scaling"),
    (["--lb", "qp-scaling", "--qps", "0"], "--qps 0"),
])
def test_a_control_parameter_or_queue_pair_count_that_cannot_apply_is_refused(flags, error):
    from aifabric.cli import build_parser, train_cli
    with pytest.raises(ValueError, match=error):
        train_cli.prepare(build_parser().parse_args(["train", "--preset", "tiny", "--dp", "2"] + flags))


def test_a_control_parameter_is_checked_against_the_defaults_scaled_to_the_fabric():
    """T_low 30 ms fits under T_high scaled to the fat tree's RTT (900 ms), though not under one
    scaled to a 1 ms RTT (25 ms)."""
    from aifabric.cli import build_parser, train_cli
    train_cli.prepare(build_parser().parse_args(["train", "--preset", "tiny", "--dp", "2", "--congestion", "timely",
                                                 "--cc-param", "t_low_s=0.03"]))


def test_control_parameters_and_queue_pairs_are_taken_and_reach_the_ranks_control():
    from types import SimpleNamespace

    from aifabric.cli import build_parser, train_cli
    from aifabric.experiments.fabric_conditions import FabricConditions
    from aifabric.lab.links import LinkPlan, LinkRate
    from hostagent.collectives.peer_cc import PeerControls
    from hostagent.congestion import CcSettings
    args = build_parser().parse_args(["train", "--preset", "tiny", "--dp", "2", "--congestion", "swift",
                                      "--cc-param", "base_target_s=0.02", "--cc-param", "hops=3",
                                      "--lb", "qp-scaling", "--qps", "6"])
    train_cli.prepare(args)
    assert FabricConditions.queue_pairs(args.lb, args.qps) == 6
    conditions = SimpleNamespace(lab=SimpleNamespace(fabric=_fat_tree()), plan=LinkPlan(LinkRate.parse("2M")))
    cc = FabricConditions.transport_cc(conditions, args.congestion, dict(args.cc_param))
    carried = CcSettings.from_arg(cc.to_arg())           # as the plan carries it to the ranks
    control = PeerControls(carried, peers=1, frame_bytes=1000, window=64).controls[0]
    assert (control.params.base_target_s, control.params.hops) == (0.02, 3)


@pytest.mark.parametrize("text", ["ai", "=2", "ai=", "ai=fast", "1x=2"])
def test_a_control_parameter_not_written_field_equals_number_is_refused_naming_it(text):
    from hostagent.congestion import parse_param
    with pytest.raises(ValueError, match="FIELD=VALUE|not a number"):
        parse_param(text)
    assert parse_param(" hai_n = 3 ") == ("hai_n", 3) and parse_param("init_cwnd=None") == ("init_cwnd", None)
