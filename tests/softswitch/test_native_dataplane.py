"""The native data plane (softswitch/native/dataplane.c) on real veths, with a hand-written
stand-in for a program's pipeline (native_stub.c: rules by port that say where a packet goes
and what it asks for; egress writes what the packet carried into its source MAC):
forwarding, queue rate and depth, priorities, multicast and clone copies with their instance
types and kept metadata, resubmit and recirculate, packet-in and packet-out, failures counted
by name, an over-long frame counted, short frames and frames too long for the port, and a write
batch seen whole by packets. Every test runs on both port I/Os (``port_io``: the ports' AF_PACKET
sockets, and AF_XDP sockets fed by an XDP program on each interface), and every data plane must
leave its interfaces without an XDP program once stopped."""
from __future__ import annotations

import ctypes
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from emulation.testbed import Testbed, free_tcp_port
from softswitch.dataplane import Dataplane
from softswitch.native import build
from softswitch.native.dataplane import NativeDataplane, load_library
from softswitch.native.mode import NativeProgram
from softswitch.native.xsk import PortIOUnavailable
from softswitch.ports import Port, PortSpec
from softswitch.runtime.pre import ReplicationEngine
from softswitch.switch import Switch, SwitchConfig

PORT_IOS = ("packet", "af_xdp")
pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veths, namespaces, raw sockets)"),
              pytest.mark.parametrize("port_io", PORT_IOS)]

STUB = Path(__file__).resolve().parent / "native_stub.c"
NORMAL, INGRESS_CLONE, EGRESS_CLONE, RECIRC, REPLICATION, RESUBMIT = 0, 1, 2, 4, 5, 6
CPU_PORT = 64
DIV_ZERO, BAD_INDEX = 3, 2          # abi.h ss_status


class StubRule(ctypes.Structure):
    _fields_ = [("egress", ctypes.c_int32)] + [(n, ctypes.c_uint32) for n in (
        "mcast", "clone_session", "clone_list", "resubmit_list", "recirculate_list", "priority",
        "status", "truncate", "tag", "mark")]


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> ctypes.CDLL:
    why = build.missing()
    if why:
        pytest.skip(why)
    out = tmp_path_factory.mktemp("native") / "stub.so"
    subprocess.run(build.compile_command([*build.DATAPLANE_SOURCES, STUB], out), check=True)
    lib = load_library(out)
    for name in ("stub_in_rule", "stub_internal_rule", "stub_out_rule"):
        getattr(lib, name).restype = ctypes.POINTER(StubRule)
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.stub_count.restype, lib.stub_count.argtypes = ctypes.c_uint64, [ctypes.c_void_p, ctypes.c_int]
    return lib


@pytest.fixture(scope="module")
def bench():
    """Four switch ports on veths, their host ends in namespaces."""
    with Testbed(nports=4, prefix=f"nd{os.getpid() % 10000}") as tb:
        ports = {n: Port(PortSpec(n, hp.switch_iface)) for n, hp in tb.ports.items()}
        try:
            yield tb, ports
        finally:
            for p in ports.values():
                p.close()


class Bench:
    """One native data plane on the bench's ports, its stub's rules at hand."""

    def __init__(self, lib, tb, ports, **kw):
        self.lib, self.tb = lib, tb
        tb.drain()
        for p in ports.values():          # what the last test (or the bench coming up) left
            while True:
                try:
                    p.sock.recv(65536)
                except BlockingIOError:
                    break
        self.dp = NativeDataplane(lib, ports, **kw)

    def rule_in(self, port: int) -> StubRule:
        return self.lib.stub_in_rule(self.dp.objects, port).contents

    def rule_internal(self, instance_type: int) -> StubRule:
        return self.lib.stub_internal_rule(self.dp.objects, instance_type).contents

    def rule_out(self, port: int) -> StubRule:
        return self.lib.stub_out_rule(self.dp.objects, port).contents

    def count(self, port: int) -> int:
        return self.lib.stub_count(self.dp.objects, port)

    def send(self, port: int, frames: list[bytes]) -> None:
        for f in frames:
            self.tb.ports[port].send(f)

    def receive(self, port: int, count: int, timeout: float = 3.0, quiet: float = 0.3) -> list[bytes]:
        """The test's frames (its EtherType) that come within ``timeout``."""
        return ours(self.tb.ports[port].receive(timeout=timeout, count=count, quiet=quiet))


def ours(frames: list[bytes]) -> list[bytes]:
    """Frames of the test's EtherType: a host's kernel may send one of its own as the bench
    comes up."""
    return [f for f in frames if f[12:14] == b"\x88\xb5"]


@pytest.fixture
def port_io() -> str:
    """The port I/O of the data planes ``switch`` makes: this module's tests are parametrized
    over PORT_IOS; a module that borrows ``switch`` gets the AF_PACKET sockets unless it asks."""
    return "packet"


def xdp_programs(ifaces) -> list[str]:
    """The interfaces among ``ifaces`` that `ip link show` says have an XDP program."""
    return [i for i in ifaces if "xdp" in subprocess.run(["ip", "link", "show", "dev", i], capture_output=True,
                                                          text=True, check=True).stdout]


@pytest.fixture
def switch(library, bench, port_io):
    made: list[Bench] = []

    def make(**kw) -> Bench:
        kw.setdefault("port_io", port_io)
        s = Bench(library, *bench, **kw)
        made.append(s)
        return s
    yield make
    for s in made:
        s.dp.stop()
    assert xdp_programs(hp.switch_iface for hp in bench[0].ports.values()) == []


def counters_once(dp: NativeDataplane, ready, timeout: float = 2.0):
    """The data plane's counters once ``ready(counters)`` holds (or at the timeout): a frame is
    counted sent when its send returns, which may be after it arrived."""
    deadline = time.monotonic() + timeout
    while not ready(c := dp.counters) and time.monotonic() < deadline:
        time.sleep(0.01)
    return c


def frame(seq: int, size: int = 64) -> bytes:
    return bytes.fromhex("000000000002") + bytes(6) + b"\x88\xb5" + seq.to_bytes(4, "big") + bytes(size - 18)


def carried(f: bytes) -> dict[str, int]:
    """What egress wrote into the source MAC."""
    return dict(zip(("instance", "rid", "tag", "mark", "port", "qid"), f[6:12]))


def seq_of(f: bytes) -> int:
    return int.from_bytes(f[14:18], "big")


def test_forwards_port_to_port_counting_packets(switch):
    s = switch()
    s.rule_in(1).egress = 2
    s.dp.start()
    sent = [frame(i) for i in range(50)]
    s.send(1, sent)
    got = s.receive(2, 50)
    assert [seq_of(f) for f in got] == list(range(50))
    assert all(f[12:] == o[12:] and carried(f) == dict(instance=NORMAL, rid=0, tag=0, mark=0, port=2, qid=0)
               for f, o in zip(got, sent))
    c = counters_once(s.dp, lambda c: c.tx >= 50)
    assert (c.tx, c.errors) == (50, 0)
    assert s.count(1) == 50
    assert s.dp.port_counters(1)[0] == 50 and s.dp.port_counters(2)[1:] == (50, 0)
    assert s.receive(3, 1, timeout=0.3) == []


def test_queue_rate_spaces_departures_and_a_full_queue_drops(switch):
    s = switch()
    s.rule_in(1).egress = 2
    s.dp.set_queue_rate(50, 2)           # one every 20 ms
    s.dp.set_queue_depth(4, 2)
    s.dp.start()
    with s.dp.lock:                      # all 20 arrive in one burst: 4 wait at most
        s.send(1, [frame(i) for i in range(20)])
    got = ours(s.tb.ports[2].receive(timeout=3.0, quiet=0.5))
    c = s.dp.counters
    assert s.dp.port_counters(1)[0] == 20 and len(got) + c.queue_drops == 20
    assert 4 <= len(got) <= 5 and c.queue_drops >= 15    # 4 queued (+1 leaving at once at most)
    assert [seq_of(f) for f in got] == list(range(len(got)))      # the first ones, in order


def test_queue_rate_paces_a_port(switch):
    s = switch()
    s.rule_in(1).egress = 2
    s.dp.set_queue_rate(100, 2)
    s.dp.start()
    s.send(1, [frame(i) for i in range(10)])
    hp = s.tb.ports[2]
    times = []
    deadline = time.monotonic() + 3
    while len(times) < 10 and time.monotonic() < deadline:    # a busy machine may hand over two at once
        times += [time.monotonic()] * len(ours(hp.receive(timeout=0.5, count=1, quiet=0.0)))
    assert len(times) == 10
    gaps = sorted(b - a for a, b in zip(times, times[1:]))
    assert gaps[len(gaps) // 2] >= 0.007            # about 10 ms apart, not a burst


def test_higher_priority_leaves_first_among_packets_due_together(switch):
    s = switch(priority_queues=2, queue_rate=2)     # a new queue's first departure: 0.5 s after start
    s.rule_in(1).egress = s.rule_in(2).egress = 3
    s.rule_in(2).priority = 1
    s.dp.start()
    with s.dp.lock:                                  # both queues filled in one loop turn
        s.send(1, [frame(i) for i in range(3)])
        s.send(2, [frame(100 + i) for i in range(3)])
    got = s.receive(3, 6, timeout=4.0, quiet=1.0)
    assert [seq_of(f) for f in got] == [100, 0, 101, 1, 102, 2]
    assert [carried(f)["qid"] for f in got] == [1, 0] * 3


def test_a_priority_the_port_lacks_is_dropped(switch):
    s = switch()
    s.rule_in(1).egress = 2
    s.rule_in(1).priority = 3
    s.dp.start()
    s.send(1, [frame(i) for i in range(5)])
    assert s.receive(2, 5, timeout=0.5) == []
    assert counters_once(s.dp, lambda c: c.dropped >= 5).dropped == 5


def test_multicast_copies_carry_replication_and_their_rid_and_follow_group_changes(switch):
    s = switch()
    s.rule_in(1).mcast = 1
    s.dp.pre.insert_group(1, [(2, 5), (3, 5), (3, 6)])
    s.dp.start()
    s.send(1, [frame(1)])
    two, three = s.receive(2, 1), s.receive(3, 2)
    assert [(carried(f)["instance"], carried(f)["rid"]) for f in two] == [(REPLICATION, 5)]
    assert [(carried(f)["instance"], carried(f)["rid"]) for f in three] == [(REPLICATION, 5), (REPLICATION, 6)]
    s.dp.pre.modify_group(1, [(4, 9)])               # mirrored into the library
    s.send(1, [frame(2)])
    assert [carried(f)["rid"] for f in s.receive(4, 1)] == [9]
    assert s.receive(2, 1, timeout=0.3) == [] and s.receive(3, 1, timeout=0.3) == []
    s.dp.pre.delete_group(1)
    s.send(1, [frame(3)])
    assert s.receive(4, 1, timeout=0.3) == []


def test_clones_carry_their_instance_type_their_field_list_only_and_the_session_length(switch):
    s = switch()
    r = s.rule_in(1)
    r.egress, r.tag, r.mark, r.clone_session, r.clone_list = 2, 9, 7, 5, 1    # field list 1: tag
    s.dp.pre.insert_session(5, [(3, 0)], packet_length_bytes=20)
    o = s.rule_out(2)
    o.clone_session, o.clone_list = 6, 2                                       # field list 2: tag, mark
    s.dp.pre.insert_session(6, [(4, 0)])
    s.dp.start()
    s.send(1, [frame(1, size=100)])
    [original] = s.receive(2, 1)
    [ingress_clone] = s.receive(3, 1)
    [egress_clone] = s.receive(4, 1)
    assert carried(original) == dict(instance=NORMAL, rid=0, tag=9, mark=7, port=2, qid=0) and len(original) == 100
    assert len(ingress_clone) == 20                       # the session's truncation
    assert carried(ingress_clone) == dict(instance=INGRESS_CLONE, rid=0, tag=9, mark=0, port=3, qid=0)
    assert carried(egress_clone) == dict(instance=EGRESS_CLONE, rid=0, tag=9, mark=7, port=4, qid=0)
    assert len(egress_clone) == 100


def test_resubmit_and_recirculate_come_back_with_their_field_list(switch):
    s = switch()
    r = s.rule_in(1)
    r.resubmit_list, r.tag, r.mark = 1, 4, 3
    # the rule ingress applies to a packet of instance type RESUBMIT (RECIRC) marks it 66 (44);
    # egress sees both as NORMAL, as the Python path and BMv2
    s.rule_internal(RESUBMIT).egress, s.rule_internal(RESUBMIT).mark = 2, 66
    s.rule_in(3).egress, s.rule_in(3).tag = 4, 8
    s.rule_out(4).recirculate_list = 1
    s.rule_internal(RECIRC).egress, s.rule_internal(RECIRC).mark = 2, 44
    s.dp.start()
    s.send(1, [frame(1)])
    [resubmitted] = s.receive(2, 1)
    assert carried(resubmitted) == dict(instance=NORMAL, rid=0, tag=4, mark=66, port=2, qid=0)
    s.send(3, [frame(2)])
    [recirculated] = s.receive(2, 1)
    assert carried(recirculated) == dict(instance=NORMAL, rid=0, tag=8, mark=44, port=2, qid=0)
    assert s.receive(4, 1, timeout=0.3) == []
    assert s.count(1) == 1 and s.count(0) == 2       # the internal packets: ingress port 0


def test_packet_in_reaches_python_and_packet_out_enters_on_the_cpu_port(switch):
    s = switch(cpu_port=CPU_PORT)
    s.rule_in(1).egress = CPU_PORT
    s.rule_in(CPU_PORT).egress = 3
    got: list[bytes] = []
    came = threading.Event()
    s.dp.on_packet_in = lambda f: (got.append(f), came.set())
    s.dp.start()
    s.send(1, [frame(7)])
    assert came.wait(3)
    assert seq_of(got[0]) == 7 and carried(got[0])["port"] == CPU_PORT
    s.dp.inject_packet_out(frame(8))
    [out] = s.receive(3, 1)
    assert seq_of(out) == 8 and s.count(CPU_PORT) == 1
    c = s.dp.counters
    assert (c.packet_in, c.packet_out, c.packet_in_lost) == (1, 1, 0)


def test_frames_read_while_held_frames_are_sent_stay_whole(switch):
    """Two ports' bursts in one loop turn: the first's 24 frames wait to be sent with the turn's
    others, and the 32nd held frame sends them while the second port's batch is being read.
    Sending must not touch that batch (on AF_XDP it once shared the frame list: the rest of the
    batch became copies of frames the switch had just sent, and its own frames were lost)."""
    s = switch(cpu_port=CPU_PORT)
    s.rule_in(1).egress, s.rule_in(2).egress, s.rule_in(CPU_PORT).egress = 3, 4, 3
    s.dp.start()
    with s.dp.lock:                        # the loop wakes for the packet-out and waits here
        s.dp.inject_packet_out(frame(999))
        time.sleep(0.2)
        s.send(1, [frame(i) for i in range(24)])
        s.send(2, [frame(100 + i) for i in range(24)])
        time.sleep(0.2)                    # its next wait finds both ports' frames: one turn
    assert sorted(seq_of(f) for f in s.receive(4, 24)) == list(range(100, 124))
    assert sorted(seq_of(f) for f in s.receive(3, 25)) == [*range(24), 999]
    c = counters_once(s.dp, lambda c: c.tx >= 49)
    assert (c.rx, c.tx, c.dropped, c.errors) == (48, 49, 0, 0)


def test_failures_are_counted_by_name_and_the_loop_goes_on(switch):
    s = switch()
    s.rule_in(1).status = DIV_ZERO
    s.rule_in(2).egress = 3
    s.rule_out(3).status = BAD_INDEX
    s.rule_in(4).egress = 1
    s.dp.start()
    s.send(1, [frame(i) for i in range(3)])
    s.send(2, [frame(i) for i in range(2)])
    s.send(4, [frame(9)])
    assert [seq_of(f) for f in s.receive(1, 1)] == [9]
    c = counters_once(s.dp, lambda c: c.errors >= 5)
    assert c.errors == 5 and c.error_kinds == {"div_zero": 3, "bad_index": 2}


def test_a_frame_longer_than_the_native_limit_is_counted_not_crashed(switch, bench, port_io):
    tb, _ = bench
    hp = tb.ports[1]
    subprocess.run(["ip", "-n", hp.ns, "link", "set", "dev", hp.host_iface, "mtu", "20000"], check=True)
    subprocess.run(["ip", "link", "set", "dev", hp.switch_iface, "mtu", "20000"], check=True)
    try:
        if port_io == "af_xdp":      # AF_XDP frames hold 3,822 bytes at most: this port cannot have one
            s = switch()
            with pytest.raises(PortIOUnavailable, match=f"port 1: AF_XDP on {hp.switch_iface}: MTU 20000: "):
                s.dp.start()
            s.dp.stop()
        s = switch(port_io="auto")      # port 1 on its AF_PACKET socket, saying why; the others AF_XDP
        s.rule_in(1).egress = 2
        s.dp.start()
        assert s.dp.port_io[1].kind == "packet" and "MTU 20000" in s.dp.port_io[1].detail
        assert s.dp.port_io[2].kind == "af_xdp"
        s.send(1, [frame(1, size=17000), frame(2)])
        assert [seq_of(f) for f in s.receive(2, 1)] == [2]
        c = counters_once(s.dp, lambda c: c.tx >= 1)
        assert c.errors == 1 and c.error_kinds == {"too_long": 1} and c.tx == 1
    finally:
        subprocess.run(["ip", "-n", hp.ns, "link", "set", "dev", hp.host_iface, "mtu", "1500"], check=True)
        subprocess.run(["ip", "link", "set", "dev", hp.switch_iface, "mtu", "1500"], check=True)


def test_short_frames_are_taken_whole_and_the_loop_goes_on(switch):
    """The shortest frames a veth carries (an Ethernet header alone, a few bytes more): counted,
    through the pipeline and out whole, the frames after them too."""
    s = switch()
    s.rule_in(1).egress = 2
    s.dp.start()
    header = bytes.fromhex("000000000002") + bytes(6) + b"\x88\xb5"
    short = [header, header + b"\x01", header + b"\x02" * 3]
    s.send(1, short + [frame(5)])
    got = s.receive(2, 4)
    assert [len(f) for f in got] == [14, 15, 17, 64]
    assert got[:3] == [carried_back(f, o) for f, o in zip(got, short)] and seq_of(got[3]) == 5
    c = counters_once(s.dp, lambda c: c.tx >= 4)
    assert (c.rx, c.tx, c.errors) == (4, 4, 0)


def carried_back(sent_back: bytes, original: bytes) -> bytes:
    """``sent_back`` is ``original`` with the stub's egress marks in its source MAC."""
    assert sent_back[:6] + sent_back[12:] == original[:6] + original[12:]
    return sent_back


def test_a_frame_too_long_for_the_port_is_lost_counted_and_the_next_goes(switch):
    """Packet-outs longer than port 3's interface carries (MTU 1500: 1,514 bytes), one within an
    AF_XDP frame (2 KiB) and one past it: each is lost and counted a send error on the port, as
    the kernel refuses it on an AF_PACKET socket; the frame after them leaves."""
    s = switch(cpu_port=CPU_PORT)
    s.rule_in(CPU_PORT).egress = 3
    s.dp.start()
    for size in (1600, 3000):
        s.dp.inject_packet_out(frame(size, size=size))
    s.dp.inject_packet_out(frame(9))
    assert [seq_of(f) for f in s.receive(3, 1)] == [9]
    c = counters_once(s.dp, lambda c: c.tx >= 3)
    assert s.dp.port_counters(3) == (0, 1, 2) and c.tx == 3 and c.errors == 0


def test_a_write_batch_is_seen_whole(switch):
    """The writer changes a rule's port and mark in two steps of one batch, a pause between:
    every frame that leaves has the mark of the port it left by."""
    s = switch()
    r = s.rule_in(1)
    r.egress, r.mark = 2, 2
    s.dp.start()
    stop = threading.Event()

    def writer():
        port = 2
        while not stop.is_set():
            port = 5 - port
            with s.dp.lock:
                r.egress = port
                time.sleep(0.002)
                r.mark = port
            time.sleep(0.001)
    t = threading.Thread(target=writer)
    t.start()
    try:
        for i in range(300):
            s.send(1, [frame(i)])
            if i % 20 == 0:
                time.sleep(0.005)
    finally:
        stop.set()
        t.join()
    two, three = (ours(s.tb.ports[p].receive(timeout=2, quiet=0.3)) for p in (2, 3))
    assert len(two) + len(three) == 300 and two and three
    assert {carried(f)["mark"] for f in two} == {2} and {carried(f)["mark"] for f in three} == {3}


def paces(dp) -> dict[int, tuple[int, int]]:
    """(packets/s, bits/s) of the bench's ports' queues."""
    return {p: (q.rate_pps, q.bitrate) for p in (1, 2, 3, 4) for q in dp.port_queues(p)}


def test_a_switch_swaps_its_data_plane_keeping_ports_queue_settings_and_packet_in(library, bench, port_io):
    """A program that runs natively replaces the Python data plane on the same ports (and back):
    the queue settings made at start and at run time (packet and bit rates, the defaults and a
    port's own) and the packet-in handler go with it."""
    tb, _ = bench
    tb.drain()
    switch = Switch(SwitchConfig(ports=[PortSpec(n, hp.switch_iface) for n, hp in tb.ports.items()],
                                  grpc_addr=f"127.0.0.1:{free_tcp_port()}", compiled="off", port_io=port_io,
                                  queue_bitrate=10**9, port_queue_bitrates={4: 2 * 10**6}))
    switch.start()
    try:
        assert type(switch.dataplane) is Dataplane
        switch.dataplane.set_queue_rate(77, 2)
        switch.dataplane.set_queue_bitrate(5 * 10**6, 3)
        kept = {1: (0, 10**9), 2: (77, 0), 3: (0, 5 * 10**6), 4: (0, 2 * 10**6)}
        assert paces(switch.dataplane) == kept
        handler = lambda frame: None    # noqa: E731
        switch.dataplane.on_packet_in = handler
        mirrored = []
        untyped = ctypes.CDLL(library._name)      # as build.py loads it: the data plane types what it calls
        stand_in = NativeProgram(None, None, untyped, lambda dp, native: mirrored.append(dp))
        switch.use_program(None, ReplicationEngine(), stand_in)
        dp = switch.dataplane
        assert isinstance(dp, NativeDataplane) and mirrored == [dp] and switch.native_path.in_use
        assert {io.kind for io in dp.port_io.values()} == {port_io}
        assert paces(dp) == kept
        assert dp.on_packet_in is handler
        with dp.lock:
            library.stub_in_rule(dp.objects, 1).contents.egress = 3
        tb.ports[1].send(frame(5))
        assert [seq_of(f) for f in ours(tb.ports[3].receive(timeout=3, count=1))] == [5]
        switch.use_program(None, ReplicationEngine(), stand_in)   # the same library again: fresh objects
        assert switch.dataplane is not dp and mirrored == [dp, switch.dataplane] and paces(switch.dataplane) == kept
        tb.ports[1].send(frame(6))
        assert ours(tb.ports[3].receive(timeout=0.5, count=1)) == []     # the old rule is gone
        switch.use_program(None, ReplicationEngine(), None)       # back to Python
        assert type(switch.dataplane) is Dataplane and not switch.native_path.in_use
        assert paces(switch.dataplane) == kept and switch.dataplane.on_packet_in is handler
        assert xdp_programs(hp.switch_iface for hp in tb.ports.values()) == []    # the Python path reads AF_PACKET
    finally:
        switch.stop()
    assert xdp_programs(hp.switch_iface for hp in tb.ports.values()) == []
