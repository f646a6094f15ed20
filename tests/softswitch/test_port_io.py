"""softswitch's port I/O (softswitch/port_io.py and its compiled twin port_io.pyx), on real
veths: both read every waiting frame in order in batches, and send a run of one port's frames
in order, a frame the kernel refuses counted lost and the ones after it still sent."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import raw

from softswitch.pipeline.compiled import PathCompiler
from softswitch.port_io import BATCH, PortIO
from softswitch.ports import Port, PortSpec
from softswitch.runtime.tables import Entry
from softswitch.switch import Switch, SwitchConfig
from emulation.testbed import Testbed, free_tcp_port

MISSING = PathCompiler().missing()
MTU = 1500
QUEUEING_JSON = Path(__file__).resolve().parents[1] / "p4/build/queueing.json"     # forwards by ingress port


@pytest.fixture(scope="module")
def compiled_port_io(tmp_path_factory) -> type:
    if MISSING:
        pytest.skip(f"compiled port I/O: {MISSING}")
    return PathCompiler(tmp_path_factory.mktemp("cache")).support("port_io").PortIO


@pytest.fixture(params=["python", "compiled"])
def port_io(request) -> PortIO:
    kind = PortIO if request.param == "python" else request.getfixturevalue("compiled_port_io")
    return kind()


@pytest.fixture
def bench():
    """A switch port on one end of a veth, a host's raw socket on the other."""
    with Testbed(nports=1, prefix=f"pio{os.getpid() % 1000}") as tb:
        hp = tb.ports[1]
        port = Port(PortSpec(1, hp.switch_iface))
        try:
            yield port, hp
        finally:
            port.close()


def _frame(seq: int, size: int = 100) -> bytes:
    return raw(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x88B5)
               / seq.to_bytes(4, "big") / (b"x" * (size - 18)))


def _read_all(port_io: PortIO, fd: int, expected: int, timeout: float = 3.0) -> list[list[bytes]]:
    """Batches read until ``expected`` frames came (or the timeout)."""
    batches, got = [], 0
    deadline = time.monotonic() + timeout
    while got < expected and time.monotonic() < deadline:
        frames = port_io.recv(fd)
        if frames:
            batches.append(frames)
            got += len(frames)
        else:
            time.sleep(0.01)
    return batches


def test_recv_reads_every_waiting_frame_in_order_a_batch_at_a_time(port_io: PortIO, bench):
    port, hp = bench
    sent = [_frame(seq) for seq in range(150)] + [_frame(150, MTU + 14)]     # the largest the veth carries
    for f in sent:
        hp.send(f)
    batches = _read_all(port_io, port.fileno(), len(sent))
    assert [f for b in batches for f in b] == sent
    assert max(len(b) for b in batches) == BATCH and all(len(b) <= BATCH for b in batches)
    assert port_io.recv(port.fileno()) == []            # nothing more: no wait, no error


def test_send_run_sends_one_ports_run_in_order_and_counts_a_refused_frame_lost(port_io: PortIO, bench):
    port, hp = bench
    hp.drain()
    ok = [_frame(seq) for seq in range(BATCH + 16)]     # more than one batch
    too_big = _frame(9999, MTU + 15)                   # over the MTU: the kernel refuses it
    waiting = [(1, f) for f in ok[:5]] + [(1, too_big)] + [(1, f) for f in ok[5:]] + [(2, _frame(7))]
    assert port_io.send_run(port.fileno(), waiting, 0) == (len(waiting) - 1, len(ok), 1)
    assert hp.receive(timeout=3.0, count=len(ok)) == ok          # in order, the refused one missing
    # a run starting further on: only its own port's frames, up to the next port's
    assert port_io.send_run(port.fileno(), waiting, len(waiting) - 1) == (len(waiting), 1, 0)
    assert hp.receive(timeout=3.0, count=1) == [_frame(7)]


@pytest.mark.parametrize("compiled", ["now", "off"])
def test_a_switch_forwards_a_burst_whole_and_in_order_with_either_port_io(compiled: str, tmp_path: Path,
                                                                        monkeypatch):
    """The data plane loop on real ports: the compiled path reads and sends in batches
    (recvmmsg, sendmmsg), the Python path a frame a system call; the frames out are the same."""
    if compiled == "now" and MISSING:
        pytest.skip(f"compiled port I/O: {MISSING}")
    monkeypatch.setenv("SOFTSWITCH_CACHE", str(tmp_path))
    with Testbed(nports=2, prefix=f"pis{os.getpid() % 1000}") as tb:
        sw = Switch(SwitchConfig(ports=[PortSpec(n, hp.switch_iface) for n, hp in tb.ports.items()],
                                 json_path=str(QUEUEING_JSON), grpc_addr=f"127.0.0.1:{free_tcp_port()}",
                                 compiled=compiled, native="off"))
        sw.start()
        try:
            prog = sw.program
            fwd = next(t for t in prog.tables.values() if t.name.endswith("fwd"))
            set_port = next(a for a in prog.actions.values() if a.name.endswith("set_port"))
            fwd.insert(Entry((1,), 0, set_port, (2,)))
            assert sw.dataplane.batched_io is (compiled == "now")
            burst = [_frame(seq) for seq in range(3 * BATCH + 7)]
            for f in burst:
                tb.ports[1].send(f)
            out = tb.ports[2].receive(timeout=5.0, count=len(burst))
            # queueing.p4 puts its 31-byte header of queueing metadata after Ethernet
            assert [f[14 + 31:] for f in out] == [f[14:] for f in burst]
            counters = sw.dataplane.counters
            # a frame is counted once its send returns, which can be after the frame arrived
            settled = time.monotonic() + 5.0
            while min(counters.tx, sw.ports[2].tx_packets) < len(burst) and time.monotonic() < settled:
                time.sleep(0.01)
            assert (counters.rx, counters.tx, counters.errors) == (len(burst), len(burst), 0)
            assert (sw.ports[1].rx_packets, sw.ports[2].tx_packets, sw.ports[2].tx_errors) == (len(burst),) * 2 + (0,)
        finally:
            sw.stop()

