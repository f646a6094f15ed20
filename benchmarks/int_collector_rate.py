#!/usr/bin/env python3
"""How many telemetry reports per second the INT collector decodes.

Three figures, for reports shaped as the fabric's sinks send them (IPv4 / UDP / INT-MD with
bitmap 0xFC00, Hop ML 8, a 5-hop cross-pod path, 64 bytes of payload kept):

* decode: `controller.telemetry.int_report.decode_reports` in a loop (the pure decoder);
* ingest: `IntCollector.ingest` in a loop (decode + per-flow/per-port accounting, no socket);
* udp: a sender process blasts datagrams at a collector on 127.0.0.1 for a few seconds; the
  figure is reports decoded per second by the collector's receiving thread (what it sustains
  under overload), with what was sent and what the kernel dropped next to it.

    .venv/bin/python -m benchmarks.int_collector_rate [--seconds 3] [--hops 5] [--json out/int_collector_rate.json]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from scapy.layers.inet import IP, UDP  # noqa: E402

from aifabric.lab import report  # noqa: E402
from controller.telemetry.int_collector import IntCollector  # noqa: E402
from controller.telemetry.int_report import (  # noqa: E402
    HopRecord,
    decode_reports,
    group_header,
    individual_report,
    int_md_stack,
    metadata_bytes,
)

FABRIC_BITMAP = 0xFC00
FLOWS = 64


def make_reports(hops: int, flows: int = FLOWS) -> list[bytes]:
    """One report per flow (distinct UDP source ports), ``hops`` hops each."""
    path = [
        HopRecord(switch_id=i + 1, ingress_port=1, egress_port=3, hop_latency_us=10 + i, queue_id=0,
                  queue_occupancy=i, ingress_ts=1000 * i, egress_ts=1000 * i + 10)
        for i in range(hops)
    ]
    stack = int_md_stack(path, bitmap=FABRIC_BITMAP, remaining_hop_count=6 - hops)
    out = []
    for f in range(flows):
        inner = bytes(IP(src="10.0.0.2", dst="10.3.1.3", tos=0x82) / UDP(sport=40000 + f, dport=5001))
        out.append(group_header(20, f) + individual_report(inner + stack + bytes(64)))
    return out


def loop_rate(fn, reports: list[bytes], seconds: float) -> float:
    """Calls of ``fn`` per second over ``reports``, round robin, for about ``seconds``."""
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for data in reports:
            fn(data)
        n += len(reports)
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def _blast(address: tuple[str, int], reports: list[bytes], seconds: float, sent: "mp.Value") -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    n = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for data in reports:
            try:
                sock.sendto(data, address)
                n += 1
            except OSError:  # ENOBUFS under overload: counted as not sent
                pass
    sent.value = n
    sock.close()


def udp_rate(reports: list[bytes], seconds: float) -> dict:
    with IntCollector("127.0.0.1", 0) as collector:
        sent = mp.Value("q", 0)
        proc = mp.get_context("fork").Process(target=_blast, args=(collector.address, reports, seconds, sent))
        start_count = collector.counters().reports_decoded
        t0 = time.monotonic()
        proc.start()
        proc.join()
        collector.wait_quiet(quiet=0.3, timeout=10)
        elapsed = time.monotonic() - t0
        counters = collector.counters()
        decoded = counters.reports_decoded - start_count
        # The receiving thread works while the sender runs and drains the socket buffer after;
        # the rate is over the sender's run plus that drain (not counting the final quiet wait).
        busy = max(elapsed - 0.3, 1e-6)
        return {
            "sent": sent.value,
            "decoded": decoded,
            "malformed": counters.malformed_total,
            "dropped_by_kernel": max(0, sent.value - counters.datagrams),
            "reports_per_s": decoded / busy,
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--hops", type=int, default=5, help="INT hops per report (a k=4 cross-pod path has 5)")
    ap.add_argument("--json", default=str(REPO / "out/int_collector_rate.json"))
    args = ap.parse_args(argv)
    if not 1 <= args.hops <= 6:
        ap.error(f"--hops {args.hops}: the fabric's INT stack holds 1..6 hops")

    reports = make_reports(args.hops)
    size = len(reports[0])
    collector = IntCollector(port=0)  # not started: ingest() only
    decode = loop_rate(decode_reports, reports, args.seconds)
    ingest = loop_rate(collector.ingest, reports, args.seconds)
    udp = udp_rate(reports, args.seconds)

    per_hop = metadata_bytes(FABRIC_BITMAP)
    overhead = 4 + 12 + per_hop * args.hops
    print(report.table(
        ["path", "reports/s", "notes"],
        [
            ("decode_reports (in process)", round(decode), f"{size}-byte reports, {args.hops} hops"),
            ("IntCollector.ingest (in process)", round(ingest), "decode + per-flow/per-port accounting"),
            ("IntCollector over UDP (127.0.0.1)", round(udp["reports_per_s"]),
             f"sent {udp['sent']}, decoded {udp['decoded']}, kernel dropped {udp['dropped_by_kernel']}"),
        ],
        title=f"INT collector decode rate ({args.seconds:g} s each)",
    ))
    print(f"\nINT bytes in the data packet: {per_hop} per hop + 16 (shim + INT-MD header) = "
          f"{overhead} bytes for {args.hops} hops")
    report.write_json(args.json, {
        "hops": args.hops,
        "report_bytes": size,
        "int_bytes_per_hop": per_hop,
        "int_bytes_per_packet": overhead,
        "decode_reports_per_s": round(decode),
        "ingest_reports_per_s": round(ingest),
        "udp": {k: round(v) if isinstance(v, float) else v for k, v in udp.items()},
        "seconds": args.seconds,
    })
    print(f"figures written to {Path(args.json).resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
