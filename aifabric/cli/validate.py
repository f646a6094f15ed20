"""The aifabric command line checked before anything is brought up.

Everything that can be known from the arguments and the machine is checked here, so a bad
value costs a second, not a bring-up: the fabric's shape and whether it fits in memory, the
target's executable, the ``--metrics`` address (bound once and released), the output files'
directories (created when missing, as ``out/`` is expected to be) and the INT demo's plan.
Every problem is a ValueError whose message names the flag and the value.
"""
from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from aifabric.cli import topo_args
from aifabric.lab import memory_plan
from softswitch.addr import parse_host_port
from topologies import addressing as ap
from emulation.p4switch import P4SwitchError, resolve_target

@dataclass(frozen=True)
class FabricSize:
    switches: int
    hosts: int
    ports: int          # the switches' ports (link ends)


def fabric_size(args: argparse.Namespace) -> FabricSize:
    """The switch and host counts of the fabric ``args`` describe; ValueError naming the
    parameter when the shape does not fit the address plan."""
    if args.command != "up" or args.topo == "fattree":     # sized without building a k=110 tree
        ap.check_fat_tree_k(args.k)
        return FabricSize(5 * args.k * args.k // 4, args.k ** 3 // 4, 5 * args.k ** 3 // 4)   # k ports a switch
    fabric = topo_args.fabric_of(args)
    return FabricSize(len(fabric.switches), len(fabric.hosts),
                      sum(len(fabric.ports_of(s.name)) for s in fabric.switches))


def check_listen_address(flag: str, text: str) -> tuple[str, int]:
    """Parse HOST:PORT (port 0: any free port) and bind it once, releasing it at once; ValueError
    naming the flag and the address when either fails."""
    try:
        host, port = parse_host_port(text, allow_port_zero=True)
    except ValueError as e:
        raise ValueError(f"{flag} {e}") from None
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as the HTTP server does
            s.bind(sockaddr)
    except OSError as e:
        raise ValueError(f"{flag} {text}: cannot listen there: {e.strerror or e}") from None
    return host, port


def prepare_output(flag: str, path: str) -> Path:
    """Make sure ``path`` can be written at the end of a run: its directory is created when
    missing; ValueError naming the flag when it cannot be, or is not writable."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{flag} {path}: is a directory, give a file name")
    parent = p.absolute().parent
    if parent.exists() and not parent.is_dir():
        raise ValueError(f"{flag} {path}: {parent} is not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"{flag} {path}: cannot create directory {parent}: {e.strerror}") from None
    if not os.access(parent, os.W_OK | os.X_OK) or p.exists() and not os.access(p, os.W_OK):
        raise ValueError(f"{flag} {path}: not writable")
    return p


def validate(args: argparse.Namespace) -> None:
    """Every check that can run before bring-up (see the module docstring); ValueError on
    the first problem."""
    if args.command == "clean":
        return
    if args.command == "bench":
        try:
            resolve_target(args.target)
        except P4SwitchError as e:
            raise ValueError(str(e)) from None
        if getattr(args, "packets", None) is not None and args.packets < 1:     # load-balance's own option
            raise ValueError(f"--packets {args.packets}: at least 1 packet per flow")
        prepare_output("--json", args.json)
        prepare_output("--png", args.png)
        return
    size = fabric_size(args)
    try:
        kind, _ = resolve_target(args.target)
    except P4SwitchError as e:
        raise ValueError(str(e)) from None
    available = memory_plan.mem_available_mib()
    try:
        fabric_plan = memory_plan.plan(size.switches, size.hosts, kind, available,
                                       getattr(args, "switches_per_process", None), size.ports)
    except ValueError as e:
        raise ValueError(f"--switches-per-process: {e}") from None
    memory_plan.check(topo_args.options(args), fabric_plan, available)
    if args.command == "up":
        failover = getattr(args, "failover", False)
        if args.metrics and not (args.int or args.hostagent or failover):
            raise ValueError("--metrics needs --int, --hostagent or --failover (the metrics come from INT, the ECN "
                             "counters, the host agents and failure handling)")
        if args.controller == "none" and (args.int or args.hostagent or failover):
            flag = "int" if args.int else "hostagent" if args.hostagent else "failover"
            raise ValueError(f"--controller none: --{flag} needs our controller "
                             f"(it installs ECN marking, INT and the failover tables)")
        if getattr(args, "no_reroute", False) and not failover:
            raise ValueError("--no-reroute needs --failover (it leaves failure handling to the data plane)")
        if failover:
            failover_config(args)
        if args.describe:
            prepare_output("--describe", args.describe)
        if args.hostagent:
            check_hostagent(args.hostagent)
        if args.metrics:
            check_listen_address("--metrics", args.metrics)
        if getattr(args, "web", None):
            check_web_address(args)
        return
    if args.json:
        prepare_output("--json", args.json)
    if args.which == "int":
        from aifabric.experiments import demo_int
        from topologies.fabric import fat_tree

        demo_int.DemoPlan.for_fat_tree(fat_tree(args.k), seconds=args.seconds)
        prepare_output("--png", args.png or demo_int.DEFAULT_PNG)
    if args.which == "allreduce":
        check_allreduce(args)
    if args.which == "train" and args.crash is not None:
        rank, step = args.crash
        if not 0 <= rank < args.workers or not 0 < step < args.steps:
            raise ValueError(f"--crash {rank}@{step}: a rank below --workers {args.workers} at a step between "
                             f"1 and --steps {args.steps}")
        if args.checkpoint_every < 1:
            raise ValueError(f"--checkpoint-every {args.checkpoint_every}: at least 1 step between two checkpoints")


def crash_arg(text: str) -> tuple[int, int]:
    """RANK@STEP (demo train --crash)."""
    try:
        rank, step = (int(v) for v in text.split("@"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: RANK@STEP, e.g. 3@40") from None
    return rank, step


def fail_arg(text: str):
    """WHAT@WHEN[+DURATION] or random:MTBF@HORIZON[+DURATION] (train --fail):
    aifabric.experiments.failure_schedule.parse_failure's."""
    from aifabric.experiments.failure_schedule import parse_failure
    try:
        return parse_failure(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def check_web_address(args: argparse.Namespace) -> None:
    """--web: our controller (the page shows its view), an address it can listen on."""
    from aifabric.lab.web_page import parse_web_address

    if args.controller == "none":
        raise ValueError("--web needs our controller (the page shows what it sees); --controller none runs none")
    try:
        host, port = parse_web_address(args.web)
    except ValueError as e:
        raise ValueError(f"--web {e}") from None
    check_listen_address("--web", f"[{host}]:{port}" if ":" in host else f"{host}:{port}")


def check_hostagent(mode: str) -> None:
    """--hostagent: bcc importable and kernel headers where bcc looks for them."""
    from hostagent.agent.config import MODES

    from hostagent.agent.requirements import bcc_missing

    if mode not in MODES:
        raise ValueError(f"--hostagent {mode}: one of {', '.join(MODES)}")
    missing = bcc_missing()
    if missing is not None:
        raise ValueError(f"--hostagent {mode}: {missing}")


MAX_ALLREDUCE_ELEMENTS = 1 << 24      # 64 MiB of float32: hours at emulated link rates


def check_allreduce(args: argparse.Namespace) -> None:
    """demo allreduce: workers that fit the fat-tree (one host stays the parameter server) and
    a tensor size the demo can use (the link rate was checked by its parser)."""
    from aifabric.experiments import demo_allreduce
    from controller.aggregation.tree import MAX_CHILDREN

    hosts = args.k ** 3 // 4
    most = min(hosts - 1, MAX_CHILDREN)
    if not 2 <= args.workers <= most:
        raise ValueError(f"--workers {args.workers}: must be 2..{most} on a k={args.k} fat-tree "
                         f"({hosts} hosts, one is the parameter server; a job holds at most {MAX_CHILDREN})")
    if not 1 <= args.size <= MAX_ALLREDUCE_ELEMENTS:
        raise ValueError(f"--size {args.size}: must be 1..{MAX_ALLREDUCE_ELEMENTS} elements")
    prepare_output("--png", args.png or demo_allreduce.DEFAULT_PNG)


def failover_config(args: argparse.Namespace):
    """The HeartbeatConfig of ``aifabric up --failover``'s options (``--link-heartbeat-ms 0``:
    no link heartbeats; not given: the target's `link_interval_for`); ValueError naming the
    options when they make none."""
    from controller.failover import HeartbeatConfig
    from controller.failover.config import link_interval_for

    link_ms = args.link_heartbeat_ms
    if link_ms is None:
        link_ms = link_interval_for(resolve_target(args.target)[0])
    try:
        return HeartbeatConfig(interval_ms=args.heartbeat_ms, multiplier=args.heartbeat_multiplier,
                               link_interval_ms=link_ms or None, link_multiplier=args.link_heartbeat_multiplier)
    except ValueError as e:
        raise ValueError(f"--heartbeat-ms {args.heartbeat_ms:g} --heartbeat-multiplier {args.heartbeat_multiplier} "
                         f"--link-heartbeat-ms {link_ms:g} --link-heartbeat-multiplier "
                         f"{args.link_heartbeat_multiplier}: {e}") from None
