"""Random, truncated and mangled frames thrown at softswitch (its default path and its native
data path): it never crashes or wedges, no packet makes the program fail, and good traffic is
forwarded afterwards."""
from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import ICMPv6ND_NS, ICMPv6NDOptSrcLLAddr, IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.packet import fuzz, raw

from controller import entries as E
from controller.fabric_controller import Pipeline
from controller.routing import NextHop
from controller.switch import SwitchConnection
from emulation.testbed import CONNECT_TIMEOUT_S, Testbed

REPO = Path(__file__).resolve().parents[2]
CTL = str(Path(sys.executable).parent / "softswitch-ctl")
ROUTER_MAC = "00:00:00:00:00:aa"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (raw sockets, veths)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _program(conn: SwitchConnection, program: str) -> Pipeline:
    if program == "fabric":
        pipe = Pipeline.from_build_dir(REPO / "p4src/build", "fabric")
        conn.set_pipeline(pipe.p4info, pipe.device_config)
        hop = NextHop(port=2, smac=ROUTER_MAC, dmac="00:00:00:00:bb:02", neighbor="sink")
        conn.insert([E.my_station(pipe.p4info, ROUTER_MAC), *E.static_route(pipe.p4info, "10.0.2.0/24", hop)])
    else:
        pipe = Pipeline.from_build_dir(REPO / "tests/p4/build", program)
        info = pipe.p4info
        conn.set_pipeline(info, pipe.device_config)
        conn.insert([E.entity(info.table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.2.0", 24)},
                                               action="MyIngress.ipv4_forward",
                                               params={"dstAddr": 0xBB02, "port": 2}))])
    return pipe


def _good() -> bytes:
    return raw(Ether(dst=ROUTER_MAC, src="00:00:00:00:00:01") / IP(src="10.0.1.1", dst="10.0.2.2")
               / UDP(sport=1, dport=2) / b"still-forwarding")


def _corpus(rng: random.Random) -> list[bytes]:
    samples = [
        _good(),
        raw(Ether(dst=ROUTER_MAC) / IP(dst="10.0.2.2") / TCP(flags="S")),
        raw(Ether(dst=ROUTER_MAC) / IP(dst="10.0.2.2", ihl=15, options=b"\x01" * 40) / ICMP()),
        raw(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="10.0.0.1")),
        raw(Ether(dst="33:33:ff:00:00:01") / IPv6(dst="ff02::1:ff00:1", hlim=255)
            / ICMPv6ND_NS(tgt="fd00::1") / ICMPv6NDOptSrcLLAddr(lladdr="00:00:00:00:00:01")),
        raw(Ether(dst=ROUTER_MAC) / IPv6(dst="fd00::2") / UDP(dport=4791) / (b"x" * 40)),
    ]
    frames = []
    for s in samples:                                   # every truncation of each
        frames += [s[:n] for n in range(len(s) + 1)]
    frames += [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 1514))) for _ in range(400)]
    random.seed(rng.random())                          # scapy's fuzz() draws from `random`
    for make in (lambda: fuzz(IP()), lambda: fuzz(IPv6()), lambda: fuzz(ARP()),
                 lambda: fuzz(IP(dst="10.0.2.2") / TCP())):
        for _ in range(150):                           # valid layering, random field values
            try:
                frames.append(raw(Ether(dst=ROUTER_MAC) / make()))
            except (TypeError, ValueError, OverflowError):
                pass                                   # scapy cannot build every random field

    frames.append(b"\xff" * 1514)                        # full-size garbage
    # a veth takes frames from an Ethernet header (14 bytes) up to its MTU
    return [f for f in frames if 14 <= len(f) <= 1514]


@pytest.mark.parametrize("path", ["python", "native"])
@pytest.mark.parametrize("program", ["basic_router", "fabric"])
def test_random_and_truncated_frames_never_hurt(program, path):
    """On softswitch as it runs by default, and on its native data path (--native on)."""
    rng = random.Random(20261122)
    frames = _corpus(rng)
    ctl_port = _free_port()
    native = ("--native", "on") if path == "native" else ()
    with Testbed(nports=2, prefix=f"fz{program[0]}{path[0]}") as tb:
        target = tb.start_target("softswitch", extra_args=("--runtime-addr", f"127.0.0.1:{ctl_port}", *native))
        conn = SwitchConnection("fuzz", target.grpc_addr, device_id=1)
        conn.connect(timeout=CONNECT_TIMEOUT_S)
        try:
            _program(conn, program)
            for i, frame in enumerate(frames):
                tb.ports[1 + i % 2].send(frame)
            tb.collect(timeout=2.0, quiet=0.5)          # let the burst drain
            assert target.proc.poll() is None, "softswitch died"
            tb.drain()
            tb.ports[1].send(_good())
            out = tb.ports[2].receive(timeout=3.0, count=1)
            assert len(out) == 1 and out[0].endswith(b"still-forwarding")
            assert Ether(out[0])[IP].ttl == 63
            stats = json.loads(subprocess.run([CTL, "--addr", f"127.0.0.1:{ctl_port}", "stats"],
                                              capture_output=True, text=True, timeout=10).stdout)
            c = stats["counters"]
            assert c["rx"] >= len(frames) * 0.9, c        # the kernel may drop a few under burst
            assert c["errors"] == 0, f"{c['errors']} packets made the program fail; see {target.log_path}"
        finally:
            conn.close()
