"""Link-heartbeat generator: the emulated counterpart of a switch ASIC's packet generator.

A switch that runs data-plane heartbeats (``p4src/include/control/failover.p4``) has one more
port, ``GEN_PORT`` (254), on a veth pair of its own: ``<switch>-eth254`` is the switch's end,
``<switch>-hbgen`` the generator's. Every interval the generator writes into the switch's
pipeline one frame per fabric port, each naming the port it is for; the pipeline sends it out
of that port (at the control priority) and the neighbour's pipeline records when it heard it.
So a heartbeat crosses the link only if the sending switch's pipeline runs: a killed switch,
like a cut link, falls silent. One process serves every switch of a fabric (a few thousand
small frames a second on a k=4 fat-tree at 10 ms).

    python -m emulation.failover_heartbeat_generator --interval-ms 10 p0e0=3,4 p0a0=1,2,3,4 ...
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from emulation.procs import marked_env, stop_process

GEN_PORT = 254
ETHERTYPE_LINK_HEARTBEAT = 0x88B6
MIN_FRAME = 60
NODE_NAME = "heartbeats"       # the generator's node marker (``aifabric clean`` finds it by it)


def switch_interface(switch: str) -> str:
    """The switch's end of its generator link: its port ``GEN_PORT``."""
    return f"{switch}-eth{GEN_PORT}"


def generator_interface(switch: str) -> str:
    return f"{switch}-hbgen"


def frame(port: int) -> bytes:
    """The generator's frame for ``port``: broadcast, ether type 0x88b6, then the port (9 bits
    of 16), padded to Ethernet's minimum."""
    if not 0 <= port < 512:
        raise ValueError(f"port {port} is not a 9-bit port number")
    head = b"\xff" * 6 + bytes.fromhex("0200000000fe") + ETHERTYPE_LINK_HEARTBEAT.to_bytes(2, "big")
    return (head + port.to_bytes(2, "big")).ljust(MIN_FRAME, b"\0")


def add_link(switch: str) -> str:
    """Create (again) the veth pair of ``switch``'s generator port, both ends up, IPv6 off;
    return the switch end's name."""
    sw, gen = switch_interface(switch), generator_interface(switch)
    subprocess.run(["ip", "link", "del", sw], stderr=subprocess.DEVNULL, check=False)
    subprocess.run(["ip", "link", "add", sw, "type", "veth", "peer", "name", gen], check=True)
    for name in (sw, gen):
        subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"], check=False)
        subprocess.run(["ip", "link", "set", name, "up"], check=True)
    return sw


class HeartbeatGenerator:
    """The generator process for a fabric: ``ports`` maps each switch to the fabric ports it
    sends heartbeats out of; the switches' generator links must exist (`add_link`)."""

    def __init__(self, ports: Mapping[str, Sequence[int]], interval_ms: float, run_dir: Path,
                 log_file: Path | None = None) -> None:
        if interval_ms <= 0:
            raise ValueError(f"heartbeat interval must be > 0 ms, not {interval_ms}")
        self.ports = {sw: sorted(p) for sw, p in ports.items() if p}
        self.interval_ms = interval_ms
        self.run_dir = run_dir
        self.log_file = log_file
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "emulation.failover_heartbeat_generator", "--interval-ms", f"{self.interval_ms:g}",
                *(f"{sw}={','.join(map(str, ports))}" for sw, ports in sorted(self.ports.items()))]

    def start(self) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        with open(self.log_file or os.devnull, "ab") as out:
            self.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True,
                                            cwd=Path(__file__).resolve().parent.parent,
                                            env=marked_env(self.run_dir, NODE_NAME))

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            stop_process(proc.pid, timeout, proc)


def _parse_plan(items: Sequence[str]) -> dict[str, list[int]]:
    plan = {}
    for item in items:
        switch, sep, ports = item.partition("=")
        try:
            numbers = [int(p) for p in ports.split(",")] if sep and ports else []
        except ValueError:
            numbers = []
        if not switch or not numbers or not all(0 < p < 512 and p != GEN_PORT for p in numbers):
            raise SystemExit(f"failover_heartbeat_generator: {item!r}: expected SWITCH=PORT[,PORT...] with ports 1..511 "
                             f"other than {GEN_PORT}")
        plan[switch] = numbers
    return plan


def run(plan: Mapping[str, Sequence[int]], interval_s: float, stop: list[bool]) -> int:
    """Send every switch's frames every ``interval_s`` until ``stop[0]``; a generator link that
    is gone (its switch's links deleted) is skipped. Returns the frames sent."""
    socks = {}
    for switch in plan:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind((generator_interface(switch), 0))
        socks[switch] = s
    frames = {sw: [frame(p) for p in ports] for sw, ports in plan.items()}
    sent, next_at = 0, time.monotonic()
    while not stop[0]:
        for switch, sock in socks.items():
            for f in frames[switch]:
                try:
                    sock.send(f)
                    sent += 1
                except OSError:
                    pass          # the link is down or being deleted: nothing to send into
        next_at += interval_s
        delay = next_at - time.monotonic()
        if delay < -interval_s:     # starved of CPU: tick from now on, no burst to catch up
            next_at, delay = time.monotonic(), 0.0
        if delay > 0:
            time.sleep(delay)
    for s in socks.values():
        s.close()
    return sent


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.failover_heartbeat_generator", description=__doc__.split("\n\n")[0])
    ap.add_argument("--interval-ms", type=float, required=True, help="one frame per port this often")
    ap.add_argument("plan", nargs="+", metavar="SWITCH=PORTS", help="a switch and its fabric ports, e.g. p0e0=3,4")
    args = ap.parse_args(argv)
    if args.interval_ms <= 0:
        ap.error(f"--interval-ms must be > 0, not {args.interval_ms:g}")
    plan = _parse_plan(args.plan)
    stop = [False]

    def on_signal(*_: object) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        sent = run(plan, args.interval_ms / 1000.0, stop)
    except OSError as err:
        print(f"failover_heartbeat_generator: {err}", file=sys.stderr)
        return 1
    print(f"failover_heartbeat_generator: {sent} frames sent", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
