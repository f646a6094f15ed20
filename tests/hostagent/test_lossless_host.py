"""A host honouring 802.1Qbb PFC as a NIC does (hostagent.lossless): its eBPF ingress program
takes the PFC frames its switch sends, and its sender (hostagent.traffic send --pause) holds the
paused class's flow for the frame's quanta at the host's link rate, or until the XON, while a flow
of another class goes on; nothing of the paused class leaves meanwhile (the egress program counts
it), and a held flow loses nothing. Real frames on a veth: the "switch" is a raw socket on its far
end, which records what the host sends and injects the PFC frames."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from emulation.testbed import Testbed
from softswitch.pfc import class_frame, pfc_frame

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, eBPF)")

LINK = 10_000_000               # the host's link: a quantum is 51.2 ns
CLASS, DSCP = 3, 26
HOST_IP, PEER_IP, PEER_MAC = "10.77.0.1", "10.77.0.2", "02:00:00:00:00:02"
SWITCH_MAC = "02:00:00:00:0f:01"        # the "switch" port's: the PFC frames' source
RATE_PPS, SECONDS = 400, 2.0


@pytest.fixture
def host():
    pytest.importorskip("bcc")
    from hostagent.lossless import HostPause
    with Testbed(nports=1, prefix=f"lh{os.getpid() % 10000}") as tb:
        hp = tb.ports[1]
        for cmd in (f"addr add {HOST_IP}/24 dev {hp.host_iface}", f"neigh add {PEER_IP} lladdr {PEER_MAC} "
                    f"dev {hp.host_iface}"):
            subprocess.run(["ip", "-n", hp.ns, *cmd.split()], check=True)
        pause = HostPause()
        try:
            ifindex = pause.attach(hp.host_iface, hp.ns, LINK, {DSCP: CLASS}, peer_mac=SWITCH_MAC)
            yield tb, pause, ifindex
        finally:
            pause.close()


def _flow(i: int, sport: int, dscp: int, priority: int) -> dict:
    return {"id": i, "dst_addr": PEER_IP, "protocol": "udp", "sport": sport, "dport": 4791,
            "size": int(RATE_PPS * SECONDS), "rate_pps": RATE_PPS, "payload": 1000, "dscp": dscp, "priority": priority}


def test_a_paused_class_is_held_for_its_quanta_or_until_xon_the_other_goes_on(host):
    tb, pause, ifindex = host
    hp = tb.ports[1]
    wire = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    wire.bind((hp.switch_iface, 0))
    wire.settimeout(0.05)
    flows = [_flow(0, 40000, DSCP, CLASS), _flow(1, 40001, 0, 0)]
    sender = subprocess.Popen(["ip", "netns", "exec", hp.ns, sys.executable, "-m", "hostagent.traffic", "send",
                               "--flows", json.dumps(flows), "--pause", pause.sender_arg(ifindex)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    src = bytes.fromhex(SWITCH_MAC.replace(":", ""))
    quanta = round(0.3 * LINK / 512)                      # 300 ms
    schedule = [(0.6, class_frame(src, CLASS, quanta)), (1.3, class_frame(src, CLASS, 65535)),
                (1.45, class_frame(src, CLASS, 0)),       # XON after 150 ms
                (1.6, pfc_frame(src, 1 << CLASS, [0] * 8)[:14] + b"\x00\x01" + bytes(44)),   # 802.3x: malformed
                (1.7, class_frame(bytes(6), CLASS, 65535))]       # from no port facing the host: not its
    seen: dict[int, list[float]] = {0: [], CLASS: []}
    t0 = None
    deadline = time.monotonic() + SECONDS + 5
    while time.monotonic() < deadline and sender.poll() is None:
        try:
            f = wire.recv(2048)
        except socket.timeout:
            f = b""
        now = time.monotonic()
        if f[12:14] == b"\x08\x00" and f[23] == 17:
            t0 = t0 or now
            seen[CLASS if f[15] >> 2 == DSCP else 0].append(now - t0)
        while t0 is not None and schedule and now - t0 >= schedule[0][0]:
            wire.send(schedule.pop(0)[1])
    out, err = sender.communicate(timeout=30)
    sent = json.loads(out.strip().splitlines()[-1])["flows"]
    assert not schedule, "the flows ended before every PFC frame was sent"
    # the worst gap of the class never paused is this run's lateness (the sender's wake-ups and
    # this loop's, which stamps the frames and sends the PFC frames): the margin of every time below
    late = max(b - a for a, b in zip(seen[0], seen[0][1:]))
    assert late < 0.12, f"class 0 was held too: a gap of {late:.3f} s (the shortest pause: 0.15 s)"
    gaps = sorted((b - a for a, b in zip(seen[CLASS], seen[CLASS][1:])), reverse=True)
    assert 0.29 <= gaps[0] <= 0.36 + late and 0.14 <= gaps[1] <= 0.2 + late, f"class {CLASS} gaps: {gaps[:3]}"
    c = pause.counters(ifindex)[CLASS]
    assert (c.pauses, c.xons, c.tx_paused) == (2, 1, 0), c
    assert c.paused_total_ns(time.monotonic_ns()) / 1e9 == pytest.approx(0.45, abs=0.03 + late)
    assert sent[0]["paused_s"] == pytest.approx(0.45, abs=0.05 + late) and sent[1]["paused_s"] == 0
    assert len(seen[CLASS]) == sent[0]["sent"] == RATE_PPS * SECONDS, "a held flow loses nothing"
    assert pause.malformed(ifindex) == 1
