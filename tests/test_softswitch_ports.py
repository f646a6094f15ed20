"""softswitch's ports on real veths (softswitch/rings.py): the receive ring hands over every
frame whole and in order, across the ring's end and after it was full; a frame too big for a
receive slot is read whole from the socket; the transmit ring sends every frame whole and in
order, one too big for it by send(), and counts what a down interface refuses; ports without
rings receive and send the same frames."""
from __future__ import annotations

import os
import random
import select
import subprocess
import time

import pytest

from softswitch.ports import Port, PortSpec
from topologies.testbed import Testbed

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (raw sockets, veths)")

SMALL_RING = 1 << 16        # one block: 32 slots of 2 KiB on a 1500-byte MTU


@pytest.fixture
def bed():
    with Testbed(nports=1, prefix=f"rr{os.getpid() % 10000}") as tb:
        yield tb


def _frames(n: int, seed: int, sizes=(60, 1514)) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        size = rng.randint(*sizes)
        out.append(b"\x02" * 6 + b"\x04" * 6 + b"\x88\xb5" + i.to_bytes(4, "big") + rng.randbytes(size - 18))
    return out


def _receive(port: Port, count: int, timeout: float = 3.0) -> list[bytes]:
    """Up to ``count`` frames, waiting on the socket as the switch's loop does."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        frame = port.receive()
        if frame is None:
            select.select([port], [], [], 0.05)
        else:
            got.append(frame)
    return got


def _send_and_settle(bed: Testbed, frames: list[bytes]) -> None:
    for f in frames:
        bed.ports[1].send(f)
    time.sleep(0.2)          # veth delivers in the sender's context; a little slack for the rest


@pytest.mark.parametrize("ring_bytes", [SMALL_RING, 0], ids=["ring", "socket"])
def test_frames_come_whole_and_in_order_across_the_rings_end(bed, ring_bytes):
    port = Port(PortSpec(1, bed.ports[1].switch_iface), rx_ring_bytes=ring_bytes)
    try:
        assert (port.rx_ring is not None) == bool(ring_bytes)
        frames = _frames(100, seed=1)
        got = []
        for i in range(0, len(frames), 20):       # 20 at a time: the 32-slot ring wraps three times
            _send_and_settle(bed, frames[i:i + 20])
            got += _receive(port, 20)
        assert got == frames
        assert port.receive() is None
    finally:
        port.close()


def test_a_full_ring_keeps_what_it_holds_and_takes_frames_again_once_read(bed):
    port = Port(PortSpec(1, bed.ports[1].switch_iface), rx_ring_bytes=SMALL_RING)
    try:
        slots = port.rx_ring.end // port.rx_ring.slot_size
        frames = _frames(slots + 10, seed=2, sizes=(60, 200))
        _send_and_settle(bed, frames)             # 10 more than the ring holds: the kernel drops those
        assert _receive(port, slots + 10, timeout=1.0) == frames[:slots]
        later = _frames(slots, seed=3, sizes=(60, 200))
        _send_and_settle(bed, later)
        assert _receive(port, slots) == later
    finally:
        port.close()


def test_a_frame_too_big_for_its_slot_is_read_whole_from_the_socket(bed):
    hp = bed.ports[1]
    port = Port(PortSpec(1, hp.switch_iface), rx_ring_bytes=SMALL_RING)     # slots for a 1500-byte MTU
    try:
        assert port.rx_ring.slot_size == 2048
        _set_mtu(hp, 9000)
        small, big, small2 = _frames(3, seed=4, sizes=(60, 100))
        big = big[:18] + random.Random(5).randbytes(8000)
        _send_and_settle(bed, [small, big, small2])
        assert _receive(port, 3) == [small, big, small2]
        assert port.rx_truncated == 0
    finally:
        port.close()


def _set_mtu(hp, mtu: int) -> None:
    subprocess.run(["ip", "link", "set", "dev", hp.switch_iface, "mtu", str(mtu)], check=True)
    subprocess.run(["ip", "netns", "exec", hp.ns, "ip", "link", "set", "dev", hp.host_iface, "mtu", str(mtu)],
                   check=True)


@pytest.mark.parametrize("ring_bytes", [SMALL_RING, 0], ids=["ring", "socket"])
def test_frames_leave_whole_and_in_order_across_the_rings_end(bed, ring_bytes):
    hp = bed.ports[1]
    port = Port(PortSpec(1, hp.switch_iface), tx_ring_bytes=ring_bytes)
    try:
        assert (port.tx_ring is not None) == bool(ring_bytes)
        frames = _frames(100, seed=6)
        got = []
        for i in range(0, len(frames), 20):       # 20 a run: the 32-slot ring wraps three times
            for f in frames[i:i + 20]:
                port.send(f)
            port.flush()
            got += hp.receive(timeout=2.0, count=20)
        assert got == frames
        assert (port.tx_packets, port.tx_errors) == (100, 0)
    finally:
        port.close()


def test_a_frame_too_big_for_the_transmit_ring_leaves_by_send_in_its_place(bed):
    hp = bed.ports[1]
    port = Port(PortSpec(1, hp.switch_iface), tx_ring_bytes=SMALL_RING)     # slots for a 1500-byte MTU
    try:
        small, small2 = _frames(2, seed=7, sizes=(60, 100))
        too_big = small[:18] + bytes(1600)                # over the MTU: refused, counted
        port.send(too_big)
        assert port.tx_errors == 1
        _set_mtu(hp, 9000)
        big = small[:18] + random.Random(8).randbytes(8000)
        for f in (small, big, small2):
            port.send(f)
        port.flush()
        assert hp.receive(timeout=2.0, count=3) == [small, big, small2]
        assert (port.tx_packets, port.tx_errors) == (3, 1)
    finally:
        port.close()


def test_frames_a_down_interface_refuses_are_counted_and_their_slots_free_again(bed):
    hp = bed.ports[1]
    port = Port(PortSpec(1, hp.switch_iface), tx_ring_bytes=SMALL_RING)
    try:
        slots = (port.tx_ring.end - port.tx_ring.start) // port.tx_ring.slot_size
        frames = _frames(slots, seed=9, sizes=(60, 200))
        subprocess.run(["ip", "link", "set", "dev", hp.switch_iface, "down"], check=True)
        for f in frames[:10]:
            port.send(f)
        port.flush()
        assert (port.tx_packets, port.tx_errors) == (0, 10)
        subprocess.run(["ip", "link", "set", "dev", hp.switch_iface, "up"], check=True)
        _wait_carrier(hp.switch_iface)
        for f in frames:                                  # every slot, the refused ones' too
            port.send(f)
        port.flush()
        assert hp.receive(timeout=2.0, count=slots) == frames
        assert (port.tx_packets, port.tx_errors) == (slots, 10)
    finally:
        port.close()


def _wait_carrier(iface: str, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if open(f"/sys/class/net/{iface}/operstate").read().strip() == "up":
            return
        time.sleep(0.02)
    raise AssertionError(f"{iface} did not come up")
