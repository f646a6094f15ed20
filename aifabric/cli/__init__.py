"""aifabric: bring up emulated AI-cluster fabrics, run the demos and the benchmarks.

Commands, with their main options (each command's --help has them all):

    aifabric up --topo fattree --k 4 [--target auto|bmv2|softswitch]    fabric + Mininet CLI
    aifabric up --topo leafspine --leaves 4 --spines 2 --hosts-per-leaf 2
    aifabric up --topo rail --servers 2 --gpus 2 --spines 2             GPU g of every server on rail g
    aifabric up --topo dualplane --leaves 2 --spines 1 --hosts-per-leaf 2  two planes, a NIC on each
    aifabric up --topo dragonfly --groups 4 --routers 2 --hosts-per-router 1 [--global-links 1]
    aifabric up --int [--metrics 127.0.0.1:9100]                        ... with ECN, INT on every
                                                                        TCP/UDP flow, Prometheus
    aifabric up --hostagent plb|dcqcn|plb+dcqcn [--int]                 ... with a host agent in
                                                                        every host (eBPF PLB/DCQCN)
    aifabric up --lossless                                              ... with traffic classes, class 3
                                                                        (DSCP 26) lossless: PFC (softswitch)
    aifabric up --failover [--heartbeat-ms 100] [--heartbeat-multiplier 5] [--no-reroute]
                           [--link-heartbeat-ms 10|50] [--link-heartbeat-multiplier 3]
                                                                        ... with heartbeats, data-plane
                                                                        failover, reroute
    aifabric up --web [HOST:]PORT                                       ... with the live page of the fabric
                                                                        (127.0.0.1 unless a HOST is given)
    aifabric up --controller none --describe fabric.json                ... switches with no pipeline,
                                                                        for your own controller
    aifabric demo [--k 4] [--target ...] [--json PATH]                  the fat-tree demo
    aifabric demo int [--k 4] [--target ...] [--json PATH] [--png PATH]  ECN + INT under congestion
    aifabric demo allreduce [--workers 8] [--size N] [--rate 10]        in-network AllReduce vs ring vs PS
    aifabric demo train [--workers 8] [--steps 100] [--rate 10]         a model trained data-parallel, gradients
                        [--crash RANK@STEP]                             summed in the switches, by ring, in one process
                                                                        (a rank crashed: resumed from a checkpoint)
    aifabric demo lossless [--rate 10] [--scenes ...] [--json PATH]     PFC on and off: incast, a victim of head-of-line
                                                                        blocking, DCQCN below/above XOFF, a pause
                                                                        storm, a deadlock (softswitch only)
    aifabric bench load-balance [--modes ...] [--patterns ...]          load-balancing modes compared
                                [--seeds ...] [--rate 10]               (`bench lb` is the same command)
    aifabric bench collectives [--ranks 8] [--sizes ...] [--ops ...]    collectives' algbw/busbw per operation,
                               [--rate 5] [--with-mpi]                  algorithm and size (nccl-tests' way),
                                                                        Open MPI's beside them with --with-mpi
    aifabric bench train [--topologies ...] [--modes ...] [--seeds ...]  a training workload across load-balancing
                         [--rate 2]                                     modes, ring vs in-network, topologies
    aifabric bench fidelity [--rates 1 4] [--parts ...]                 the lab against physics and papers: rate
                                                                        invariance, the latency-aware estimate,
                                                                        SwitchML's trend, nccl-tests' busbw
    aifabric bench resilience [--recoveries ...] [--seeds ...]          a job through the same seeded failures
                              [--mtbf 6] [--outage 2]                   under each recovery: time lost, ETTR
    aifabric bench cc [--controls ...] [--seeds ...] [--rate 10]       host congestion controls (none, DCQCN, TIMELY,
                                                                        Swift) on one incast: queue, short flows' FCT
    aifabric clean                                                      remove leftovers (of every lab)
    aifabric --lab NAME up|demo|bench|train|fail|restore|clean ...      a lab of that name, in a network
                                                                        namespace of its own: labs side by side
    aifabric fail link A B | fail switch S                              inject a failure into the fabric
    aifabric restore link A B | restore switch S                        of a running `aifabric up`
    aifabric controller --fabric FILE [--metrics HOST:PORT] [--int]     the controller as a service
                                                                        for a fabric description
    aifabric compose --topo fattree --k 4 --out DIR [--target ...]      every switch and host a container,
                                                                        every link a network (compose, Swarm)
    aifabric workload show --preset NAME [--dp N --tp N --pp N --ep N] [--place --topo ...] [--json PATH]
                                                                        a training job's ops per rank, bytes
                                                                        per collective, analytic step time
    aifabric train --preset NAME [--dp N --tp N --pp N] [--iterations N]  that workload executed on a fabric's
          [--collectives ring|in_network] [--lb MODE] [--rate 2]        hosts: step, compute, exposed comm,
          [--congestion none|dcqcn]                                     the estimate beside it, link load
                                                                        (--lb plb, dcqcn: the hosts' agents)

Link rates (--rate, bench fidelity's --rates) are per direction, in Mbit/s or with a unit:
--rate 10, --rate 2.5M, --rate 500k, --rate 1000pps (packets per second, as BMv2 limits them).
"""
from __future__ import annotations

import argparse
import os
import sys

# gRPC's own log lines (INFO about GOAWAYs, reconnects) go to stderr from C, unsynchronised with
# ours and without their line breaks; the controller reports what matters itself. Read once, when
# gRPC loads: before any import below can load it. GRPC_VERBOSITY=INFO in the environment wins.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

from aifabric.cli import topo_args
from aifabric.containers.compose_project import LINK_POOL
from aifabric.cli.validate import crash_arg, failover_config, validate
from aifabric.lab import named_labs
from aifabric.lab.links import rate_arg
from controller.failover.config import HeartbeatConfig as HeartbeatDefaults
from hostagent.agent.config import MODES as AGENT_MODES
from hostagent.collectives.aggregation.protocol import FRAME_VALUES, MAX_FRAME_VALUES
from softswitch.addr import parse_host_port
from softswitch.args import OneLineErrors
from emulation.p4switch import TARGETS

CONTROLLERS = ("aifabric", "none")
TARGET_HELP = "P4 target (default %(default)s)"
P4_BUILD_HELP = "where fabric.json and fabric.p4info.txtpb are (default: the committed build)"


def build_parser() -> argparse.ArgumentParser:
    summary, commands = __doc__.split("\n\n", 1)
    p = OneLineErrors(prog="aifabric", description=summary, epilog=commands,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lab", metavar="NAME", default=os.environ.get(named_labs.NAME_ENV),
                   help="the lab to bring up or act on: a named lab runs in network namespace aifabric-NAME, "
                        "beside the unnamed one and other named ones (default: $AIFABRIC_LAB_NAME, else the "
                        "unnamed lab in the machine's namespace; aifabric.lab.named_labs)")
    sub = p.add_subparsers(dest="command", required=True)

    up = _command(sub, "up", help="bring a fabric up and open the Mininet CLI")
    topo_args.add_arguments(up)
    up.add_argument("--target", choices=TARGETS, default="auto",
                    help="P4 target: bmv2 (simple_switch_grpc), softswitch, or auto, bmv2 when it is on PATH, "
                         "else softswitch (default %(default)s)")
    up.add_argument("--switches-per-process", type=int, metavar="N",
                    help="softswitch serves N switches a process (1: a process each, a failure injected into "
                         "a switch kills that switch alone); default: 1 while that takes at most half the available "
                         "memory, else groups of 32 (a k=16 fat-tree; aifabric.lab.memory_plan)")
    up.add_argument("--p4-build", metavar="DIR", help=P4_BUILD_HELP)
    up.add_argument("--int", action="store_true",
                    help="ECN marking, INT on every TCP/UDP flow, the telemetry network and the INT collector")
    up.add_argument("--metrics", metavar="HOST:PORT",
                    help="with --int, --hostagent or --failover: serve Prometheus metrics (INT, ECN marks, link "
                         "utilisation, host agents' counters, failed links and switches) there")
    up.add_argument("--controller", choices=CONTROLLERS, default="aifabric",
                    help="aifabric: ours pushes the pipeline and routes; none: the switches come up with no "
                         "pipeline and no controller, for yours (see --describe)")
    up.add_argument("--describe", metavar="FILE",
                    help="write the fabric description (switches' P4Runtime addresses and device ids, ports, "
                         "links, hosts, pipeline files; JSON, schema aifabric/lab/fabric-description.schema.json) "
                         "there once the fabric is up")
    up.add_argument("--web", metavar="[HOST:]PORT",
                    help="serve the live page of the fabric there (controller.web; 127.0.0.1 when only a port is "
                         "given); changes from the page need the token printed at start")
    up.add_argument("--hostagent", choices=AGENT_MODES,
                    help="run a host agent in every host: PLB repathing on ECN marks, DCQCN (CNPs and the "
                         "senders' reaction point), or both (hostagent.agent; defaults as `hostagent MODE`)")
    up.add_argument("--lossless", action="store_true",
                    help="traffic classes on every switch, class 3 (DSCP 26, 'rdma') lossless with 802.1Qbb PFC and the "
                         "hosts honouring it (controller.lossless; softswitch only: BMv2 has no PFC)")

    up.add_argument("--failover", action="store_true",
                    help="failure handling: heartbeats on every fabric port, data-plane failover, reroute and "
                         "repair, failed links and switches named (and on --metrics); controller.failover")
    up.add_argument("--heartbeat-ms", type=float, default=HeartbeatDefaults.interval_ms,
                    help="with --failover: one heartbeat per fabric port this often (default %(default)s)")
    up.add_argument("--heartbeat-multiplier", type=int, default=HeartbeatDefaults.multiplier,
                    help="with --failover: a port is dead after this many silent intervals (default %(default)s)")
    up.add_argument("--link-heartbeat-ms", type=float,
                    help="with --failover: link heartbeats kept in the data plane, one per fabric port this often "
                         "(0: none; default 10 on softswitch, 50 on BMv2, which takes several times longer per "
                         "packet)")
    up.add_argument("--link-heartbeat-multiplier", type=int, default=HeartbeatDefaults.link_multiplier,
                    help="with --failover: a switch skips a port whose link heartbeats stopped for this many "
                         "intervals, by itself (default %(default)s)")
    up.add_argument("--no-reroute", action="store_true",
                    help="with --failover: data-plane failover alone (dead ports leave the groups at once; routes "
                         "are never recomputed), to see it apart from the controller's reroute")

    demo = _command(sub, "demo", help="run a demo (default: the fat-tree forwarding demo)")
    demo.add_argument("which", nargs="?", choices=("fabric", "int", "allreduce", "train", "lossless"), default="fabric",
                      help="fabric: forwarding and ECMP; int: a congested link seen through INT and ECN; "
                           "allreduce: in-network aggregation against ring and parameter server; "
                           "train: a model learning the digits data-parallel, in the switches, by ring, in one process; "
                           "lossless: priority flow control, its pathologies and its watchdog, PFC off and on")
    demo.add_argument("--k", type=int, default=4, help="fat-tree arity (default %(default)s)")
    demo.add_argument("--target", choices=TARGETS, default="softswitch",
                      help="P4 target (default: the embedded softswitch)")
    demo.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    demo.add_argument("--p4-build", metavar="DIR", help=P4_BUILD_HELP)
    demo.add_argument("--png", metavar="PATH",
                      help="demo int/allreduce/train/lossless: where to save the picture (default out/int_demo.png, "
                           "out/allreduce_demo.png, out/train_demo.png, out/lossless_demo.png)")
    demo.add_argument("--seconds", type=float, default=3.0,
                      help="demo int: how long each run sends (default %(default)g s)")
    demo.add_argument("--workers", type=int, default=8,
                      help="demo allreduce/train: workers, spread over racks and pods (default %(default)s)")
    demo.add_argument("--size", type=int, default=262144, help="demo allreduce: tensor elements (default %(default)s)")
    demo.add_argument("--frame-values", type=int, choices=FRAME_VALUES,
                      help="demo allreduce: values an in-network frame carries, whole 64-value blocks; 64 is "
                           f"SwitchML's (default: the lab's jobs', {MAX_FRAME_VALUES}, the most a 1500-byte MTU holds)")
    demo.add_argument("--dtype", choices=("float32", "int32"), default="float32",
                      help="demo allreduce: tensor type (default %(default)s)")
    demo.add_argument("--rate", type=rate_arg, help="demo allreduce/train/lossless: every link's rate per direction, "
                      "Mbit/s or with a unit (2.5M, 500k, 1000pps) (default: 10 Mbit/s for allreduce and lossless, "
                      "not limited for train)")
    demo.add_argument("--steps", type=int, default=100, help="demo train: SGD steps (default %(default)s)")
    demo.add_argument("--crash", type=crash_arg, metavar="RANK@STEP",
                      help="demo train: that rank's process ends at that step in both runs; each then starts again "
                           "from its last checkpoint (see --checkpoint-every)")
    demo.add_argument("--checkpoint-every", type=int, default=10, metavar="N",
                      help="demo train with --crash: steps between two checkpoints (default %(default)s)")
    from aifabric.experiments.demo_lossless import SCENES as LOSSLESS_SCENES
    demo.add_argument("--scenes", nargs="+", choices=LOSSLESS_SCENES, default=list(LOSSLESS_SCENES),
                      help="demo lossless: which scenes (default: all)")

    bench = _command(sub, "bench", help="run a comparison on a fabric: load-balance (lb), collectives, train, fidelity, "
                                        "resilience, cc")
    bench_sub = bench.add_subparsers(dest="which", required=True)
    from aifabric.cli.load_balance_cli import add_arguments as lb_arguments
    lb = _command(bench_sub, "load-balance", aliases=["lb"],
                             help="ECMP, spraying, flowlets and TE on the same flows (k=4)")
    lb_arguments(lb)
    lb.add_argument("--p4-build", metavar="DIR", help=P4_BUILD_HELP)
    coll = _command(bench_sub, "collectives", help="the process group's operations x algorithms x sizes on rate-limited "
                                                   "links: time, algbw, busbw against the links' bound (k=4)")
    from aifabric.experiments.collectives_bench import add_arguments as collectives_arguments
    collectives_arguments(coll)
    coll.add_argument("--target", choices=("softswitch", "bmv2"), default="softswitch", help=TARGET_HELP)
    train = _command(bench_sub, "train", help="a training workload across load-balancing modes, DP all-reduce by ring "
                                              "and in the switches, and topologies: step time, medians")
    from aifabric.experiments.train_bench import add_arguments as train_bench_arguments
    train_bench_arguments(train)
    train.add_argument("--target", choices=("softswitch", "bmv2"), default="softswitch", help=TARGET_HELP)
    fidelity = _command(bench_sub, "fidelity", help="the lab against physics and papers: the same iteration at two "
                                                    "link rates, measured against the latency-aware estimate, "
                                                    "SwitchML's trend and nccl-tests' bus bandwidth (k=4)")
    from aifabric.experiments.fidelity_bench import add_arguments as fidelity_arguments
    fidelity_arguments(fidelity)
    fidelity.add_argument("--target", choices=("softswitch", "bmv2"), default="softswitch", help=TARGET_HELP)
    resilience = _command(bench_sub, "resilience", help="one training job through the same seeded link failures "
                                                        "under each recovery (none, data-plane failover, controller "
                                                        "reroute, both): time lost, effective training time (k=4)")
    from aifabric.experiments.resilience_bench import add_arguments as resilience_arguments
    resilience_arguments(resilience)
    cc = _command(bench_sub, "cc", help="the hosts' congestion controls (none, DCQCN, TIMELY, Swift) on the same "
                                        "incast: bottleneck queue, short flows' completion times, fairness (k=4)")
    from aifabric.experiments.cc_bench import add_arguments as cc_arguments
    cc_arguments(cc)
    for bench_parser in (coll, train, fidelity):
        bench_parser.add_argument("--p4-build", metavar="DIR", help=P4_BUILD_HELP)

    _command(sub, "clean", help="remove switch processes, namespaces and veths left by a crash")
    for verb, what in (("fail", "take a link down or kill a switch"), ("restore", "bring a link or switch back")):
        inject = _command(sub, verb, help=f"{what} in the fabric of a running `aifabric up` (aifabric.lab.failures)")
        element = inject.add_subparsers(dest="element", required=True)
        link = _command(element, "link", help="both ends of the link between nodes A and B")
        link.add_argument("a", metavar="A", help="a switch or host at one end")
        link.add_argument("b", metavar="B", help="the node at the other end")
        _command(element, "switch", help="the switch's target process").add_argument(
            "switch", metavar="S", help="the switch's name")
    compose = _command(sub, "compose", help="write a compose project and a Swarm stack of the fabric: every switch "
                                            "and host a container, every link a network (aifabric.containers.compose_project)")
    topo_args.add_arguments(compose)
    compose.add_argument("--out", required=True, metavar="DIR", help="where compose.yml, stack.yml and fabric.json go")
    compose.add_argument("--target", choices=("softswitch", "bmv2"), default="softswitch",
                         help="the switches' image: softswitch, or BMv2 (aifabric/fabric-bmv2, built where its base image is)")
    compose.add_argument("--link-pool", default=LINK_POOL, metavar="CIDR",
                         help="IPv4 network the links' Docker subnets (/29 each) are taken from (default %(default)s)")
    compose.add_argument("--place-pods", action="store_true",
                         help="stack.yml: keep each pod (its switches and hosts) on the Swarm nodes labelled "
                              "aifabric.pod<P>=true, cores and spines on aifabric.top=true, the controller on a manager")
    from aifabric.containers.controller_service import add_arguments as controller_arguments
    controller_arguments(_command(sub, "controller", help="keep the switches of a fabric description at their desired "
                                                          "state (a long-running service)"))
    from aifabric.cli.train_cli import add_arguments as train_arguments
    train_arguments(_command(sub, "train", help="a training workload executed on a fabric (aifabric.experiments.train_runner)"))
    workload = _command(sub, "workload", help="a training job's operations from a model's shape (aifabric.workloads)")
    from aifabric.cli.workload_cli import add_arguments as workload_arguments
    shows = workload.add_subparsers(dest="which", required=True)
    workload_arguments(_command(shows, "show", help="ops per rank, bytes per collective kind and the analytic step "
                                                    "time, real and emulated"))
    return p


def _command(sub, name: str, **kw) -> argparse.ArgumentParser:
    """A command whose own --help opens with the line the list of commands gives it."""
    kw.setdefault("description", kw.get("help"))
    return sub.add_parser(name, **kw)


def _write_compose(args: argparse.Namespace) -> int:
    from aifabric.containers.compose_project import ComposeProject

    try:
        project = ComposeProject(topo_args.fabric_of(args), target=args.target, link_pool=args.link_pool,
                                 place_pods=args.place_pods)
        written = project.write(args.out)
    except (ValueError, OSError) as e:
        print(f"aifabric: error: {e}", file=sys.stderr)
        return 2
    print(f"{project.fabric.describe()}: {len(project.fabric.switches)} switches, {len(project.fabric.hosts)} hosts, "
          f"{len(project.fabric.links)} link networks; wrote {', '.join(str(p) for p in written)}")
    print(f"  one machine: docker compose -f {written[1]} up -d     a Swarm: docker stack deploy -c {written[2]} NAME")
    if project.place_pods:
        print("  before deploying, label the Swarm nodes: docker node update --label-add LABEL=true NODE, with LABEL "
              "each of " + ", ".join(project.placement_labels()))
    return 0


def _lossless_config(args: argparse.Namespace):
    """``up --lossless``: the lab's RoCE class, lossless from the start, else None."""
    if not args.lossless:
        return None
    from aifabric.lab.lossless import rdma_classes
    return rdma_classes(lossless=True)


def _start_metrics(lab, where: str):
    """The Prometheus exporter of a running lab, serving on ``where`` (HOST:PORT)."""
    from aifabric.lab.report import progress
    from controller.metrics import fabric_metrics

    host, port = parse_host_port(where, allow_port_zero=True)    # checked by validate()
    collectors = []
    if lab.agents is not None:
        from hostagent.agent.metrics import AgentCollector
        collectors.append(AgentCollector(lab.agent_dir))
    if lab.lossless is not None:
        from controller.lossless import LosslessCollector
        collectors.append(LosslessCollector(lab.lossless.poller))
    exporter = fabric_metrics(lab.controller, lab.collector, collectors=collectors)
    bound = exporter.start_http(host, port)
    progress(f"Prometheus metrics on http://{bound[0]}:{bound[1]}/metrics")
    return exporter


def _start_web(lab, failures, where: str):
    """The live page of a running lab, serving on ``where`` ([HOST:]PORT)."""
    from aifabric.lab.report import progress
    from aifabric.lab.web_page import lab_page, parse_web_address

    page = lab_page(lab, failures, *parse_web_address(where))     # checked by validate()
    page.start()
    progress(page.announce())
    return page


def _interrupted(stop: BaseException) -> int:
    """After a signal: say whether the teardown left anything (checked, not assumed)."""
    from aifabric.lab.interrupts import exit_status
    from emulation.cleanup import leftovers

    what = "interrupted" if isinstance(stop, KeyboardInterrupt) else f"terminated ({stop})"
    left = leftovers()
    if left:
        print(f"\naifabric: {what}; teardown left {left.describe()}; run `aifabric clean`", file=sys.stderr)
    else:
        print(f"\naifabric: {what}; everything was torn down", file=sys.stderr)
    return exit_status(stop)


def _in_named_lab(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> int | None:
    """Run the command inside its named lab's namespace (its exit status), or None when this is
    that run already (aifabric.lab.named_labs)."""
    if args.command in ("controller", "compose", "workload"):
        parser.error(f"--lab names a lab to bring up or act on; `aifabric {args.command}` brings none up")
    try:
        lab = named_labs.NamedLab(args.lab)
    except ValueError as e:
        parser.error(str(e))
    if lab.is_current():
        if args.command not in ("clean", "fail", "restore"):
            print(f"lab {lab.name}: in network namespace {lab.netns}, logs in {lab.run_dir}; what it serves is "
                  f"reached with `ip netns exec {lab.netns} ...`", file=sys.stderr)
        return None
    if os.environ.get(named_labs.INSIDE_ENV) == lab.name:
        print(f"aifabric: error: the command run again for lab {lab.name} is not in its namespace {lab.netns}",
              file=sys.stderr)      # run again, it would start itself again, and so on
        return 2
    if os.geteuid() != 0:
        print("aifabric: error: must run as root (network namespaces)", file=sys.stderr)
        return 2
    try:
        return named_labs.run_inside(lab, argv, _relayed(args))
    except OSError as e:
        print(f"aifabric: error: lab {lab.name}: cannot relay to it: {e}", file=sys.stderr)
        return 2


def _relayed(args: argparse.Namespace) -> list[tuple[str, int]]:
    """The addresses a named lab serves that its outer command relays from the machine's
    namespace: --web and --metrics where given with a port (port 0, any free one, is chosen
    inside and cannot be known here: such a page or exporter is reached inside only, said)."""
    from aifabric.lab.web_page import parse_web_address
    from softswitch.addr import parse_host_port

    out = []
    for flag, parse in (("web", parse_web_address),
                        ("metrics", lambda t: parse_host_port(t, allow_port_zero=True))):
        text = getattr(args, flag, None)
        if not text:
            continue
        try:
            host, port = parse(text)
        except ValueError:
            continue                    # the command inside names the error
        if port == 0:
            print(f"aifabric: --{flag} {text}: a port chosen inside the lab's namespace is not relayed; give one",
                  file=sys.stderr)
            continue
        out.append((host, port))
    return out


def _clean(args: argparse.Namespace) -> int:
    """Clean this lab (inside a named lab's namespace, that one), or, in the machine's
    namespace without --lab, the unnamed lab and then every named one in its own namespace."""
    from aifabric.lab.interrupts import shielded
    from emulation.cleanup import cleanup

    with shielded():
        done = cleanup()
    named = [] if args.lab is not None else named_labs.existing()
    where = f"in lab {args.lab}" if args.lab else "in the unnamed lab" if named else "on this machine"
    print(done.describe(where))
    status = 1 if done else 0
    idle = [lab.name for lab in named if not lab.has_anything()]
    if idle:
        print(f"\nNamed labs with nothing left to clean (their logs kept in {named_labs.RUN_DIRS}): "
              f"{', '.join(idle)}.")
    for lab in (lab for lab in named if lab.name not in idle):
        print(f"\nLab {lab.name} (network namespace {lab.netns}):", flush=True)
        status |= named_labs.run_inside(lab, ["--lab", lab.name, "clean"]) != 0
    return status


def pipeline_of(args: argparse.Namespace):
    """The P4 program (controller.fabric_controller.Pipeline) a command brings its fabric up with:
    --p4-build's, else the committed build (commands without the option take the committed one)."""
    from controller.fabric_controller import Pipeline

    build_dir = getattr(args, "p4_build", None)
    return Pipeline.from_build_dir(build_dir) if build_dir else Pipeline.from_build_dir()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.lab is not None:
        status = _in_named_lab(parser, args, sys.argv[1:] if argv is None else argv)
        if status is not None:
            return status
    if args.command == "controller":     # no root, no bring-up checks: it only speaks P4Runtime
        from aifabric.containers import controller_service
        return controller_service.main(args)
    if args.command == "compose":     # files only: no root, nothing brought up
        return _write_compose(args)
    if args.command == "workload":    # descriptions only: no root, no fabric
        from aifabric.cli import workload_cli
        return workload_cli.run(args)
    if args.command == "train":       # its own checks, its own lab
        from aifabric.cli import train_cli
        return train_cli.run(args)
    if args.command == "bench" and args.which in ("train", "fidelity", "resilience", "cc"):     # their own labs
        if os.geteuid() != 0:
            print("aifabric: error: must run as root (network namespaces, raw sockets)", file=sys.stderr)
            return 2
        if args.which == "fidelity":
            from aifabric.experiments import fidelity_bench
            return fidelity_bench.run_args(args)
        if args.which == "cc":
            from aifabric.experiments import cc_bench
            return cc_bench.run_args(args)
        if args.which == "resilience":
            from aifabric.experiments import resilience_bench
            return resilience_bench.run_args(args)
        from aifabric.experiments import train_bench
        return train_bench.run_args(args)
    if args.command in ("fail", "restore"):     # a request to the fabric's control socket
        from aifabric.lab import control_socket
        return control_socket.main(args)
    try:
        validate(args)          # before anything is brought up
    except ValueError as e:
        parser.error(str(e))
    if os.geteuid() != 0:
        print("aifabric: error: must run as root (network namespaces, raw sockets)", file=sys.stderr)
        return 2
    from aifabric.lab.interrupts import SignalGate, Terminated
    from aifabric.lab.lab import Lab
    from aifabric.lab.report import progress
    from emulation.p4switch import P4SwitchError

    try:
        if args.command == "clean":
            return _clean(args)
        gate = SignalGate()     # first SIGINT/SIGTERM/SIGHUP unwinds into teardown; later ones wait
        with gate.installed():
            pipeline = pipeline_of(args)
            if args.command == "up":
                fabric = topo_args.fabric_of(args)
                telemetry = None
                if args.int:
                    from controller.telemetry.entries import TelemetryConfig, WatchRule
                    telemetry = TelemetryConfig(watchlist=(WatchRule(),))  # every TCP/UDP flow
                hostagent = None
                if args.hostagent:
                    from controller.telemetry.entries import TelemetryConfig
                    from hostagent.agent.config import AgentConfig
                    hostagent = AgentConfig(args.hostagent)
                    telemetry = telemetry or TelemetryConfig(int_enabled=False)   # the agents feed on ECN marks
                failover = None
                if args.failover:
                    failover = failover_config(args)
                with Lab(fabric, target=args.target, pipeline=pipeline, progress=progress,
                         telemetry=telemetry, hostagent=hostagent, failover=failover,
                         lossless=_lossless_config(args),
                         failover_reroute=not args.no_reroute, switches_per_process=args.switches_per_process,
                         run_controller=args.controller == "aifabric") as lab:
                    from mininet.cli import CLI
                    from mininet.log import setLogLevel
                    if args.describe:
                        lab.description().write(args.describe)
                        progress(f"fabric description written to {args.describe}")
                    exporter = _start_metrics(lab, args.metrics) if args.metrics else None
                    from aifabric.lab.control_socket import ControlServer
                    from aifabric.lab.failures import Failures
                    failures = Failures(lab)      # one injector: the page shows what the socket did too
                    control = ControlServer(failures).start()
                    progress(f"failure injection: `aifabric fail|restore ...` (socket {control.path})")
                    page = None
                    try:
                        page = _start_web(lab, failures, args.web) if args.web else None
                        print(fabric.describe())
                        with gate.sigint_passed_on():    # Ctrl-C in Mininet's CLI stops its command
                            setLogLevel("output")     # what the CLI's commands print (pingall's results)
                            CLI(lab.net)
                    finally:
                        control.stop()
                        if page is not None:
                            page.stop()
                        if exporter is not None:
                            exporter.stop()
                return 0
            if args.which == "int":
                from aifabric.experiments import demo_int
                return demo_int.run(k=args.k, target=args.target, json_path=args.json, png_path=args.png,
                                    pipeline=pipeline, seconds=args.seconds)
            if args.command == "bench" and args.which == "collectives":
                from aifabric.experiments import collectives_bench
                return collectives_bench.run_args(args)
            if args.command == "bench":
                from aifabric.cli import load_balance_cli
                return load_balance_cli.run(args, pipeline)
            if args.which == "allreduce":
                from aifabric.experiments import demo_allreduce
                return demo_allreduce.run(k=args.k, target=args.target, workers=args.workers, size=args.size,
                                          dtype=args.dtype, json_path=args.json, png_path=args.png,
                                          pipeline=pipeline, rate=args.rate or demo_allreduce.DEFAULT_RATE,
                                          frame_values=args.frame_values or demo_allreduce.LAB_FRAME_VALUES)
            if args.which == "lossless":
                from aifabric.experiments import demo_lossless
                return demo_lossless.run(k=args.k, target=args.target, json_path=args.json, png_path=args.png,
                                         pipeline=pipeline, rate=args.rate or demo_lossless.RATE,
                                         scenes=tuple(args.scenes))
            if args.which == "train":
                from aifabric.experiments import demo_train
                return demo_train.run(k=args.k, target=args.target, workers=args.workers, steps=args.steps,
                                      rate=args.rate, json_path=args.json, png_path=args.png, pipeline=pipeline,
                                      crash=args.crash, checkpoint_every=args.checkpoint_every)
            from aifabric.experiments import demo_fabric
            return demo_fabric.run(k=args.k, target=args.target, json_path=args.json, pipeline=pipeline)
    except (KeyboardInterrupt, Terminated) as stop:
        return _interrupted(stop)
    except (ValueError, FileNotFoundError, OSError, P4SwitchError) as e:
        print(f"aifabric: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
