#!/usr/bin/env python3
"""Packets per second through a P4 target: softswitch, and BMv2 side by side where installed.

For each target and program, one switch sits between veth pairs (host ends in namespaces); a
generator process blasts frames into port 1 for a few seconds and the frames leaving port 2
are counted. The figure is the delivered rate under overload (what the target sustains),
with the offered rate and loss next to it, and its inverse, the target's time per packet.
Programs: a plain IPv4 router (tests/p4/basic_router.p4), the fabric (p4src/fabric.p4: routing
plus an ECMP selector) and the fabric's in-network aggregation (314-byte aggregation packets
of a job whose root is this switch with one child, so every packet completes its slot: 64
register reads and writes, and one result out of port 2).

    .venv/bin/python benchmarks/target_pps.py [--seconds 5] [--json out/target_pps.json]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")   # the generator forks while gRPC threads run

from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import raw  # noqa: E402

from aifabric import report  # noqa: E402
from controller import entries as E  # noqa: E402
from controller.fabric_controller import Pipeline  # noqa: E402
from controller.routing import NextHop  # noqa: E402
from controller.switch import SwitchConnection  # noqa: E402
from topologies.testbed import HostPort, Testbed  # noqa: E402

ROUTER_MAC = "00:00:00:00:00:aa"
FLOWS = 64          # distinct UDP source ports, so the fabric's ECMP hash varies


def frames() -> list[bytes]:
    return [raw(Ether(dst="00:00:00:00:00:aa", src="00:00:00:00:00:01")
                / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64) / UDP(sport=49152 + i, dport=4791)
                / bytes(64)) for i in range(FLOWS)]


def setup_basic_router(pipe: Pipeline, conn: SwitchConnection) -> None:
    info = pipe.p4info
    conn.insert([E.entity(info.table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.2.0", 24)},
                                           action="MyIngress.ipv4_forward",
                                           params={"dstAddr": 0xBB02, "port": 2}))])


def setup_fabric(pipe: Pipeline, conn: SwitchConnection) -> None:
    hop = NextHop(port=2, smac=ROUTER_MAC, dmac="00:00:00:00:bb:02", neighbor="sink")
    conn.insert([E.my_station(pipe.p4info, ROUTER_MAC), *E.static_route(pipe.p4info, "10.0.2.0/24", hop)])


AGG = "FabricIngress.aggregation."


def setup_aggregation(pipe: Pipeline, conn: SwitchConnection) -> None:
    from p4.v1 import p4runtime_pb2
    info = pipe.p4info
    pre = p4runtime_pb2.PacketReplicationEngineEntry()
    pre.multicast_group_entry.multicast_group_id = 0x1001
    pre.multicast_group_entry.replicas.add(egress_port=2, instance=1)
    conn.insert([E.entity(pre)])
    conn.insert([
        E.entity(info.table_entry(AGG + "agg_jobs", {"job_id": 1}, action=AGG + "aggregate_root", params={
            "epoch": 1, "slot_base": 0, "slot_count": FLOWS, "fan_in": 1, "group": 0x1001})),
        E.entity(info.table_entry("FabricEgress.aggregation.agg_result_dst", {"egress_port": 2},
                                  action="FabricEgress.aggregation.to_worker",
                                  params={"smac": ROUTER_MAC, "dmac": "00:00:00:00:bb:02", "ipv4": "10.0.2.2"}))])


def aggregation_frames() -> list[bytes]:
    import numpy as np
    from hostagent.allreduce.protocol import AGG_UDP_PORT, AggHeader, PktType, pack_packet
    values = np.arange(64, dtype=np.int32)
    return [raw(Ether(dst=ROUTER_MAC, src="00:00:00:00:00:01") / IP(src="10.0.1.1", dst="10.0.9.9")
                / UDP(sport=AGG_UDP_PORT, dport=AGG_UDP_PORT, chksum=0)
                / pack_packet(AggHeader(PktType.CONTRIB, 0, 1, i, set_id, 0, 1, 127, i), values))
            for set_id in (0, 1) for i in range(FLOWS)]     # the other set clears the child's bit: never a retransmission


# program -> (build directory, JSON name, control-plane setup, frames)
PROGRAMS = {
    "basic_router": (REPO / "tests/p4/build", "basic_router", setup_basic_router, frames),
    "fabric": (REPO / "p4src/build", "fabric", setup_fabric, frames),
    "aggregation": (REPO / "p4src/build", "fabric", setup_aggregation, aggregation_frames),
}


def blast(port: HostPort, payloads: list[bytes], seconds: float, sent: mp.Value) -> None:
    """Child process: send as fast as the socket takes them for ``seconds``."""
    send = port.sock.send
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for f in payloads:
            try:
                send(f)
                n += 1
            except BlockingIOError:
                pass
    sent.value = n


# BMv2 builds to compare with: the one on PATH, and an optimised one (built with BMv2's
# recommended `CXXFLAGS=-O3 --disable-logging-macros --disable-elogger`) where present.
BMV2_OPTIMISED = Path("/opt/bmv2-opt/bin/simple_switch_grpc")


def measure(target: str, program: str, seconds: float) -> dict:
    build_dir, json_name, setup, make_frames = PROGRAMS[program]
    pipe = Pipeline.from_build_dir(build_dir, json_name)
    kind, exe = ("bmv2", str(BMV2_OPTIMISED)) if target == "bmv2-opt" else (target, None)
    with Testbed(nports=2, prefix=f"bp{target[0]}") as tb:
        t = tb.start_target(kind, device_id=1, executable=exe)
        conn = SwitchConnection(f"{target}", t.grpc_addr, device_id=1)
        conn.connect()
        try:
            conn.set_pipeline(pipe.p4info, pipe.device_config)
            setup(pipe, conn)
            payloads = make_frames()
            # warm-up: one frame through, so first-packet costs are not measured
            tb.ports[1].send(payloads[0])
            if not tb.ports[2].receive(timeout=2.0, count=1):
                raise RuntimeError(f"{target}/{program}: the warm-up frame did not come out of port 2")
            tb.drain()
            sent = mp.Value("q", 0)
            gen = mp.get_context("fork").Process(target=blast, args=(tb.ports[1], payloads, seconds, sent))
            t0 = time.monotonic()
            gen.start()
            received = 0
            rx = tb.ports[2]
            while time.monotonic() - t0 < seconds + 1.0:
                received += len(rx.receive(timeout=0.2, quiet=0.05))
            gen.join()
        finally:
            conn.close()
    offered = sent.value / seconds
    delivered = received / seconds
    return {"target": target, "program": program, "seconds": seconds, "sent": sent.value,
            "received": received, "offered_pps": round(offered), "delivered_pps": round(delivered),
            "loss_pct": round(100.0 * (1 - received / sent.value), 1) if sent.value else 0.0,
            "us_per_packet": round(1e6 / delivered, 1) if delivered else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--json", default=str(REPO / "out/target_pps.json"))
    ap.add_argument("--targets", nargs="*", default=None,
                    help="softswitch, bmv2, bmv2-opt (default: those installed)")
    ap.add_argument("--programs", nargs="*", default=list(PROGRAMS), choices=list(PROGRAMS))
    args = ap.parse_args(argv)
    targets = args.targets or (["softswitch"] + (["bmv2"] if shutil.which("simple_switch_grpc") else [])
                               + (["bmv2-opt"] if BMV2_OPTIMISED.exists() else []))
    results = []
    for program in args.programs:
        for target in targets:
            report.progress(f"{target} / {program}: {args.seconds:g} s of traffic")
            results.append(measure(target, program, args.seconds))
    rows = [(r["program"], r["target"], r["offered_pps"], r["delivered_pps"], r["loss_pct"], r["us_per_packet"])
            for r in results]
    print(report.table(["program", "target", "offered pps", "delivered pps", "loss %", "us / packet"], rows,
                       title="Throughput through one switch (106-byte frames; aggregation: 314; port 1 -> port 2)"))
    by = {(r["program"], r["target"]): r["delivered_pps"] for r in results}
    for program in args.programs:
        for bmv2 in ("bmv2", "bmv2-opt"):
            if by.get((program, bmv2)) and (program, "softswitch") in by:
                ratio = by[(program, "softswitch")] / by[(program, bmv2)]
                print(f"{program}: softswitch / {bmv2} = {ratio:.2f}")
    report.write_json(args.json, {"results": results})
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
