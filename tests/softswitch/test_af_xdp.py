"""softswitch's AF_XDP port I/O (``--port-io``; softswitch/native/xsk.py and xsk.c) in real switch
processes on veths, running tests/p4/queueing.p4 natively (ports 1 -> 2 and 3 -> 4):

- the mode and its reason: auto takes AF_XDP on every port and ``softswitch-ctl packet_path``
  says so; a port that cannot have it (an MTU larger than an AF_XDP frame) runs on its AF_PACKET
  socket, the reason shown and counted; ``af_xdp`` refuses the push naming the port, and leaves
  no program behind; the command line's flag, its environment default and what it needs;
- frames not for the socket (a second queue's: the socket is queue 0's) passed on to the port's
  AF_PACKET socket by the XDP program, and through the switch all the same;
- the XDP programs detached at a stop, a crash (SIGKILL) and a restart on the same veths; a
  program another tool left on an interface replaced; a removed interface's socket closed while
  the other ports go on; frames sent to a port that is down lost, never sent when it is up again;
- an idle switch on AF_XDP costs no CPU.

The packet semantics on AF_XDP (queues, rates, copies, the CPU port, ...) are checked where the
AF_PACKET port I/O's are, on both: test_native_dataplane.py, test_softswitch_bitrate.py,
test_packet_scenarios.py::test_native_same_as_python, and a group's in test_switch_group.py."""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from controller.switch import PipelineError, SwitchConnection
from emulation.testbed import CONNECT_TIMEOUT_S, Target, Testbed, free_tcp_port
from scenarios.queueing import _frame, _setup
from scenarios.runner import Setup, load_p4info, program_files
from softswitch.ctl import send_command
from softswitch.native import build
from softswitch.options import CliError, parse_config
from test_native_dataplane import xdp_programs

ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veths, namespaces, XDP)")
NATIVE = pytest.mark.skipif(build.missing() is not None, reason=f"native data path: {build.missing()}")
LEFTOVER = Path(__file__).resolve().parent / "xdp_leftover.c"
XDP_FLAGS_SKB_MODE = 1 << 1


def test_the_flag_its_environment_default_and_what_it_needs(monkeypatch):
    monkeypatch.delenv("SOFTSWITCH_PORT_IO", raising=False)
    assert parse_config(["--no-p4"])[0].port_io == "auto"
    assert parse_config(["--no-p4", "--port-io", "packet"])[0].port_io == "packet"
    monkeypatch.setenv("SOFTSWITCH_PORT_IO", "af_xdp")
    assert parse_config(["--no-p4"])[0].port_io == "af_xdp"
    with pytest.raises(CliError, match="--port-io af_xdp needs the native data path"):
        parse_config(["--no-p4", "--native", "off"])
    monkeypatch.setenv("SOFTSWITCH_PORT_IO", "rings")
    with pytest.raises(CliError, match="SOFTSWITCH_PORT_IO='rings' is not one of auto, af_xdp, packet"):
        parse_config(["--no-p4"])


# ---- a switch process ------------------------------------------------------------------------
class Running:
    """A softswitch process on a test bench, queueing.p4 pushed (its ports' frames then native)."""

    def __init__(self, tb: Testbed, target: Target, ctl: str):
        self.tb, self.target, self.ctl = tb, target, ctl

    def status(self) -> dict:
        return json.loads(send_command(self.ctl, "packet_path"))

    def stats(self) -> dict:
        return json.loads(send_command(self.ctl, "stats"))

    def forwards(self, src: int, dst: int, n: int = 5, first: int = 0) -> int:
        """Frames of ``n`` sent into ``src`` that come out of ``dst``."""
        for port in (src, dst):
            self.tb.ports[port].drain()
        for i in range(first, first + n):
            self.tb.ports[src].send(_frame(i))
        return len([f for f in self.tb.ports[dst].receive(timeout=3, count=n) if b"queue me" in f])

    def ifaces(self) -> list[str]:
        return [hp.switch_iface for hp in self.tb.ports.values()]


def start(tb: Testbed, *args: str) -> Running:
    ctl = f"127.0.0.1:{free_tcp_port()}"
    target = tb.start_target("softswitch", device_id=1, extra_args=("--compiled", "off", "--native", "on",
                                                                     "--runtime-addr", ctl, *args))
    return Running(tb, target, ctl)


def push(grpc_addr: str, device_id: int = 1) -> None:
    """queueing.p4 and its forwarding entries to the switch at ``grpc_addr``."""
    json_path, p4info_path = program_files("queueing")
    info = load_p4info(p4info_path)
    conn = SwitchConnection(f"device {device_id}", grpc_addr, device_id=device_id)
    conn.connect(timeout=CONNECT_TIMEOUT_S)
    try:
        conn.set_pipeline(info, json_path.read_bytes())
        _setup(Setup(info, conn))
    finally:
        conn.close()


@contextmanager
def bench(name: str, jumbo: int | None = None) -> Iterator[Testbed]:
    """Four ports; port ``jumbo``'s veth (both ends) with an MTU of 9000, too large for AF_XDP."""
    if not program_files("queueing")[0].exists():
        pytest.skip("tests/p4/build/queueing.json is not built")
    with Testbed(nports=4, prefix=f"{name}{os.getpid() % 1000}") as tb:
        if jumbo is not None:
            hp = tb.ports[jumbo]
            subprocess.run(["ip", "-n", hp.ns, "link", "set", "dev", hp.host_iface, "mtu", "9000"], check=True)
            subprocess.run(["ip", "link", "set", "dev", hp.switch_iface, "mtu", "9000"], check=True)
        yield tb


@contextmanager
def switch(tb: Testbed, *args: str) -> Iterator[Running]:
    sw = start(tb, *args)
    push(sw.target.grpc_addr)
    try:
        yield sw
    finally:
        sw.target.stop()


@ROOT
@NATIVE
def test_auto_takes_af_xdp_on_every_port_and_says_so():
    with bench("xa") as tb, switch(tb) as sw:
        status = sw.status()
        assert status["native"] and status["port_io_mode"] == "auto" and status["port_io"] == "af_xdp (copy mode)"
        assert status["port_io_ports"] == {i: "af_xdp (copy mode)" for i in sw.ifaces()}
        assert status["port_io_fallbacks"] == 0
        assert xdp_programs(sw.ifaces()) == sw.ifaces()
        assert sw.forwards(1, 2) == 5 and sw.forwards(3, 4) == 5
        assert sw.stats()["ports"]["1"]["kernel_drops"] == 0
        sw.target.proc.send_signal(signal.SIGTERM)
        assert sw.target.proc.wait(timeout=30) == 0
        assert xdp_programs(sw.ifaces()) == []


@ROOT
@NATIVE
def test_a_port_without_af_xdp_runs_on_its_af_packet_socket_saying_why_and_counted():
    with bench("xm", jumbo=3) as tb:
        hp = tb.ports[3]
        with switch(tb) as sw:
            status = sw.status()
            why = f"packet: AF_XDP on {hp.switch_iface}: MTU 9000: frames longer than an AF_XDP frame of 3840 bytes holds"
            assert status["port_io_ports"][hp.switch_iface] == why
            assert status["port_io_ports"][tb.ports[1].switch_iface] == "af_xdp (copy mode)"
            assert f"{hp.switch_iface}: {why}" in status["port_io"] and status["port_io_fallbacks"] == 1
            assert xdp_programs(sw.ifaces()) == [tb.ports[n].switch_iface for n in (1, 2, 4)]
            assert sw.forwards(1, 2) == 5 and sw.forwards(3, 4) == 5
        with switch(tb, "--port-io", "packet") as sw:
            status = sw.status()
            assert status["port_io"] == "packet: --port-io packet" and status["port_io_fallbacks"] == 0
            assert xdp_programs(sw.ifaces()) == [] and sw.forwards(1, 2) == 5


@ROOT
@NATIVE
def test_af_xdp_mode_refuses_the_push_naming_the_port_and_leaves_no_program():
    with bench("xf", jumbo=3) as tb:
        sw = start(tb, "--port-io", "af_xdp")
        with pytest.raises(PipelineError, match=rf"AF_XDP port I/O \(--port-io af_xdp\) cannot be had: port 3: "
                                                rf"AF_XDP on {tb.ports[3].switch_iface}: MTU 9000"):
            push(sw.target.grpc_addr)
        assert xdp_programs(sw.ifaces()) == []          # ports 1 and 2 had theirs: closed again
        sw.target.stop()


@ROOT
@NATIVE
def test_frames_of_a_queue_without_a_socket_go_to_the_af_packet_socket_and_through():
    """Port 1's veth with two queues each way: its peer sends a frame on the queue its flow hashes
    to; the XDP program redirects queue 0's to the AF_XDP socket and passes queue 1's on to the
    kernel, where the port's AF_PACKET socket reads them (veth counts both per queue)."""
    with bench("xq") as tb:
        hp = tb.ports[1]
        subprocess.run(["ethtool", "-L", hp.switch_iface, "rx", "2", "tx", "2"], check=True)
        subprocess.run(["ip", "netns", "exec", hp.ns, "ethtool", "-L", hp.host_iface, "rx", "2", "tx", "2"], check=True)
        with switch(tb) as sw:
            assert sw.status()["port_io_ports"][hp.switch_iface] == "af_xdp (copy mode)"
            assert sw.forwards(1, 2, n=32) == 32                       # 32 flows
            stats = _ethtool_stats(hp.switch_iface)
            assert stats["rx_queue_0_xdp_redirect"] > 0 and stats["rx_queue_1_xdp_packets"] > 0
            assert stats["rx_queue_0_xdp_redirect"] + stats["rx_queue_1_xdp_packets"] == 32
            assert stats["rx_queue_1_xdp_redirect"] == 0 and stats["rx_queue_1_xdp_drops"] == 0


def _ethtool_stats(iface: str) -> dict[str, int]:
    out = subprocess.run(["ethtool", "-S", iface], capture_output=True, text=True, check=True).stdout
    return {k.strip(): int(v) for k, v in (line.split(":") for line in out.splitlines()[1:])}


@ROOT
@NATIVE
def test_a_stop_a_crash_and_a_restart_leave_no_program_behind():
    with bench("xk") as tb:
        sw = start(tb)
        push(sw.target.grpc_addr)
        assert xdp_programs(sw.ifaces()) == sw.ifaces() and sw.forwards(1, 2) == 5
        sw.target.proc.send_signal(signal.SIGKILL)       # a crash: the kernel detaches a link with its process
        sw.target.proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while xdp_programs(sw.ifaces()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert xdp_programs(sw.ifaces()) == []
        with switch(tb) as again:                      # the same veths at once
            assert again.status()["port_io"] == "af_xdp (copy mode)" and again.forwards(1, 2) == 5
        assert xdp_programs(sw.ifaces()) == []


@ROOT
@NATIVE
def test_a_program_another_tool_left_on_an_interface_is_replaced(tmp_path: Path):
    """An XDP_DROP program attached the old way (netlink, no link: it outlives whoever attached
    it) on port 1's interface: the switch replaces it, saying so, and frames flow."""
    from pyroute2 import IPRoute
    helper = tmp_path / "leftover.so"
    subprocess.run(build.compile_command([LEFTOVER], helper), check=True)
    fd = ctypes.CDLL(str(helper)).leftover_program()
    assert fd >= 0, os.strerror(-fd)
    with bench("xl") as tb:
        iface = tb.ports[1].switch_iface
        with IPRoute() as ipr:
            ipr.link("set", index=ipr.link_lookup(ifname=iface)[0],
                     xdp={"attrs": [("IFLA_XDP_FD", fd), ("IFLA_XDP_FLAGS", XDP_FLAGS_SKB_MODE)]})
        os.close(fd)
        assert "leftover_drop" in subprocess.run(["ip", "link", "show", iface], capture_output=True, text=True).stdout
        with switch(tb) as sw:
            assert sw.status()["port_io"] == "af_xdp (copy mode)" and sw.forwards(1, 2) == 5
            log = sw.target.log_path.read_text()
            assert "replaced the XDP program 'leftover_drop' (id " in log and f"generic mode) left on {iface}" in log
        assert xdp_programs(sw.ifaces()) == []


@ROOT
@NATIVE
def test_a_removed_interface_closes_its_socket_and_the_other_ports_go_on():
    with bench("xr") as tb, switch(tb) as sw:
        gone = tb.ports[3].switch_iface
        subprocess.run(["ip", "link", "del", "dev", gone], check=True)
        deadline = time.monotonic() + 5
        while "removed" not in sw.status()["port_io_ports"][gone] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sw.status()["port_io_ports"][gone] == "packet: its interface was removed: AF_XDP socket closed"
        assert sw.forwards(1, 2) == 5
        assert sw.target.proc.poll() is None


@ROOT
@NATIVE
def test_frames_sent_to_a_port_that_is_down_are_lost_not_sent_when_it_is_up_again():
    with bench("xd") as tb, switch(tb) as sw:
        out = tb.ports[2].switch_iface
        subprocess.run(["ip", "link", "set", "dev", out, "down"], check=True)
        sent_before = sw.stats()["ports"]["2"]["tx"]
        for i in range(5):
            tb.ports[1].send(_frame(i))
        deadline = time.monotonic() + 3
        while sw.stats()["counters"]["tx"] < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        subprocess.run(["ip", "link", "set", "dev", out, "up"], check=True)
        time.sleep(0.5)
        assert sw.stats()["ports"]["2"]["tx"] == sent_before          # lost (counted as send errors)
        assert sw.forwards(1, 2, first=100) == 5                     # the ones after: through, alone
        assert [f for f in tb.ports[2].receive(timeout=0.5) if b"queue me" in f] == []


@ROOT
@NATIVE
def test_an_idle_switch_on_af_xdp_costs_no_cpu():
    """Its loop sleeps in epoll until a frame or a timer (no busy polling): a few wake-ups a
    second. Counted as wake-ups (context switches of its threads): the CPU share of a process
    that wakes a few dozen times a second is the kernel's tick accounting more than its work
    (an idle gRPC server alone read 2-3% of a core on one machine, under 1% on another), so the
    share only has to be far from a spinning thread's 100%."""
    with bench("xi") as tb, switch(tb) as sw:
        assert sw.status()["port_io"] == "af_xdp (copy mode)" and sw.forwards(1, 2) == 5
        time.sleep(0.5)
        pid = sw.target.proc.pid
        before, cpu0, t0 = _wakeups(pid), _cpu_s(pid), time.monotonic()
        time.sleep(3)
        seconds = time.monotonic() - t0
        share, after = (_cpu_s(pid) - cpu0) / seconds, _wakeups(pid)
        rates = {name: (after[name] - before.get(name, 0)) / seconds for name in after}
        loop = rates.get("ss-dataplane")
        assert loop is not None, f"no data plane thread among {sorted(rates)}"
        assert loop <= 10 and sum(rates.values()) <= 100 and share < 0.1, \
            f"an idle switch: its loop woke {loop:.1f} times a second, all its threads {sum(rates.values()):.0f}, " \
            f"{share:.1%} of a core"


def _wakeups(pid: int) -> dict[str, int]:
    """Context switches so far of a process's threads, summed by thread name."""
    out: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
        name = status["Name"].strip()
        out[name] = out.get(name, 0) + int(status["voluntary_ctxt_switches"]) + int(status["nonvoluntary_ctxt_switches"])
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process's threads."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
