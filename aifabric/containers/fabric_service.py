"""The fabric as a headless service, for the Docker ``fabric`` container: a topology in Mininet
with its switch targets up, no controller and no pipeline, the telemetry network for INT, and
the fabric description (`aifabric.lab.description`) written for a controller elsewhere (``aifabric
controller --fabric FILE`` in the ``controller`` container). It runs until SIGTERM/SIGINT, then
tears everything down (`emulation.mininet_topo.stop_net`, then `emulation.cleanup.cleanup`
for this fabric's nodes) and removes the description, so no reader takes gone switches for live.

    python -m aifabric.containers.fabric_service --describe /run/aifabric/fabric.json \\
        [--topo fattree --k 4 | --topo leafspine --leaves 4 --spines 2 --hosts-per-leaf 2] \\
        [--target auto|bmv2|softswitch] [--no-telemetry]

Unlike `aifabric.lab.lab.Lab` it starts no controller, no INT collector and no host agents: the
controller service owns the switches (and the collector, on the telemetry bridge's address, in
the same network namespace), and nothing here needs a terminal (no Mininet CLI).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aifabric.lab.description import FabricDescription, PipelineFiles
from aifabric.lab.lab import fabric_nodes
from controller.fabric_controller import Pipeline
from softswitch.args import OneLineErrors
from softswitch.signal_stop import STOP_SIGNALS, SignalStop
from topologies.fabric import Fabric, fat_tree, leaf_spine
from emulation.mininet_topo import make_net, stop_net
from mininet.log import setLogLevel      # after emulation: it undoes Mininet's logger class
from emulation.cleanup import cleanup
from emulation.p4switch import RUN_DIR, TARGETS, P4Switch, P4SwitchError


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrors(prog="aifabric-fabric", description=__doc__.split("\n\n")[0])
    p.add_argument("--describe", required=True, metavar="FILE", help="where to write the fabric description")
    p.add_argument("--topo", choices=("fattree", "leafspine"), default="fattree")
    p.add_argument("--k", type=int, default=4, help="fat-tree arity (even, >= 2)")
    p.add_argument("--leaves", type=int, default=4)
    p.add_argument("--spines", type=int, default=2)
    p.add_argument("--hosts-per-leaf", type=int, default=2)
    p.add_argument("--target", choices=TARGETS, default="softswitch")
    p.add_argument("--no-telemetry", action="store_true", help="no telemetry network (no INT reports)")
    return p


def fabric_of(args: argparse.Namespace) -> Fabric:
    if args.topo == "fattree":
        return fat_tree(args.k)
    return leaf_spine(args.leaves, args.spines, args.hosts_per_leaf)


def describe(fabric: Fabric, net, pipeline: Pipeline) -> FabricDescription:
    """The description of ``fabric`` running in ``net`` (no controller: ``controller.kind`` none)."""
    switches = [sw for sw in net.switches if isinstance(sw, P4Switch)]
    files = None
    if pipeline.p4info_path is not None and pipeline.json_path is not None:
        files = PipelineFiles(str(pipeline.p4info_path), str(pipeline.json_path))
    return FabricDescription.from_fabric(
        fabric, target=switches[0].target_kind if switches else None, pipeline=files,
        switch_pids={sw.name: sw.process.pid for sw in switches if sw.process is not None},
        host_pids={h.name: net.get(h.name).pid for h in fabric.hosts},
        runtime_addresses={sw.name: sw.runtime_address for sw in switches})


def serve(fabric: Fabric, target: str, description: Path, telemetry: bool, stop: SignalStop) -> None:
    """Bring ``fabric`` up, describe it, wait for ``stop``, tear down (also after an error)."""
    setLogLevel("warning")
    description.unlink(missing_ok=True)
    net = make_net(fabric, target=target, log_dir=RUN_DIR / "logs", telemetry=telemetry)
    try:
        net.start()
        path = describe(fabric, net, Pipeline.from_build_dir()).write(description)
        print(f"aifabric-fabric: {fabric.describe()} up on {target}; description in {path}", flush=True)
        stop.wait()
    finally:
        description.unlink(missing_ok=True)
        stop_net(net)
        left = cleanup(nodes=fabric_nodes(fabric)).remaining
        print(f"aifabric-fabric: torn down{'; left ' + left.describe() if left else ''}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stop = SignalStop(STOP_SIGNALS)
    try:
        serve(fabric_of(args), args.target, Path(args.describe), not args.no_telemetry, stop)
    except (ValueError, OSError, P4SwitchError) as err:
        print(f"aifabric-fabric: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
