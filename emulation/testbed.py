"""A one-switch test bench: veth pairs whose far ends sit in their own network namespaces.

Tests and benchmarks use it to put a P4 target (softswitch or BMv2) between real Linux
interfaces and to send and capture raw frames on the hosts' side::

    with Testbed(nports=2) as tb:
        target = tb.start_target("softswitch", device_id=1)
        ...                      # push a pipeline over P4Runtime to target.grpc_addr
        tb.ports[1].send(frame)
        frames = tb.ports[2].receive(timeout=1.0)

Everything it creates (namespaces, veths, the target process) is removed on exit, also
when the test fails. Its targets log under /tmp/aifabric-testbed, outside the run directory
of fabrics, so `aifabric clean` and a fabric's teardown never touch a running test bench.
"""
from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from pyroute2 import IPRoute, NetNS, netns

from emulation import control_ports
from emulation.p4switch import (
    BMV2_LOG_LEVEL,
    P4SwitchError,
    port_accepts,
    resolve_target,
    tail,
    target_command,
)
from emulation.procs import stop_process
from hostagent.netns import run_in_netns

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
# how long a client of a started target may wait for its P4Runtime channel: the port accepts
# before a starved server (a Python softswitch beside a fabric and a compiler) answers HTTP/2;
# 10 s was seen to run out on the 2-core machine under `make test`
CONNECT_TIMEOUT_S = 30.0


def _disable_ipv6(path_prefix: str, iface: str) -> None:
    """Keep the kernel from sending router solicitations and MLD reports on a test link."""
    p = Path(f"{path_prefix}/proc/sys/net/ipv6/conf/{iface}/disable_ipv6")
    try:
        p.write_text("1")
    except OSError:
        pass


def socket_in_netns(path: str, family: int, kind: int, proto: int = 0) -> socket.socket:
    """A socket made in the network namespace at ``path`` (``/proc/PID/ns/net``)."""
    return run_in_netns(path, lambda: socket.socket(family, kind, proto))


@dataclass
class HostPort:
    """The host end of one switch port: a namespace, an interface and a raw socket."""

    number: int
    switch_iface: str
    host_iface: str
    ns: str
    sock: socket.socket | None = None

    def open(self) -> None:
        """``ns``: a namespace's name, or the path of one (``/proc/PID/ns/net``, a Mininet host's)."""
        if self.ns.startswith("/"):
            s = socket_in_netns(self.ns, socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        else:
            s = netns.create_socket(self.ns, socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        s.bind((self.host_iface, 0))
        s.setblocking(False)
        self.sock = s

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def receive(self, timeout: float = 1.0, count: int | None = None, quiet: float = 0.2) -> list[bytes]:
        """Frames that arrive within ``timeout``; returns early once ``count`` arrived, or
        ``quiet`` seconds after the last frame once at least one arrived."""
        return [f for _, f in collect_frames([self], timeout, quiet, count)]

    def wait_for(self, match, timeout: float = 3.0) -> bytes | None:
        """The first frame for which ``match(frame)`` is true within ``timeout``, or None."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            for _, frame in collect_frames([self], left, quiet=0.0, count=1):
                if match(frame):
                    return frame
        return None

    def kernel_rx_packets(self) -> int:
        """Frames the host's interface has received, by its kernel counter: all that reached the
        host, whether its socket had room for them or not (benchmarks count a target's output
        so, not by what a Python reader keeps up with)."""
        cmd = ["ip", "-s", "-j", "link", "show", "dev", self.host_iface]
        cmd = (["nsenter", f"--net={self.ns}", *cmd] if self.ns.startswith("/") else ["ip", "-n", self.ns, *cmd[1:]])
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=10).stdout
        return json.loads(out)[0]["stats64"]["rx"]["packets"]

    def drain(self) -> None:
        while True:
            try:
                self.sock.recv(65536)
            except BlockingIOError:
                return

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


@dataclass
class Target:
    kind: str
    name: str
    grpc_addr: str
    proc: subprocess.Popen
    log_path: Path
    ports: dict[int, str] = field(default_factory=dict)
    control_port: int | None = None     # BMv2's Thrift port, closed to other machines while it runs

    def stop(self) -> None:
        stop_process(self.proc.pid, proc=self.proc)
        if self.control_port is not None and self.proc.poll() is not None:
            control_ports.reopen([self.control_port])
            self.control_port = None

    def memory_mib(self, field: str = "VmRSS") -> float:
        """A memory figure of the target process from /proc/PID/status, in MiB: ``VmRSS``
        (resident now) or ``VmHWM`` (the most it has been resident)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
        raise KeyError(f"/proc/{self.proc.pid}/status has no {field} line")


class Testbed:
    __test__ = False      # not a pytest test class, despite the name
    def __init__(self, nports: int = 2, prefix: str | None = None, run_dir: Path = Path("/tmp/aifabric-testbed")):
        if not 0 <= nports <= 64:
            raise ValueError(f"nports must be 0..64, got {nports}")
        self.prefix = prefix or f"tb{os.getpid() % 100000}"
        if len(self.prefix) > 8:
            raise ValueError(f"prefix '{self.prefix}' is too long for interface names (8 characters at most)")
        self.nports = nports
        self.run_dir = run_dir
        self.ports: dict[int, HostPort] = {}
        self.targets: list[Target] = []

    # -- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> "Testbed":
        try:
            self.setup()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def setup(self) -> None:
        for _ in range(self.nports):
            self.add_port()

    def add_port(self, number: int | None = None) -> HostPort:
        """One more veth pair (switch end up in the root namespace, host end in a namespace of
        its own, IPv6 off on both so the kernel sends nothing on its own), waited until up; the
        switch's port ``number`` (default: the next after the highest so far)."""
        n = number if number is not None else max(self.ports, default=0) + 1
        if n in self.ports or not 1 <= n <= 510:
            raise ValueError(f"port {n}: taken already or not a port number (1..510)")
        hp = HostPort(n, f"{self.prefix}s{n}", f"{self.prefix}h{n}", f"{self.prefix}n{n}")
        self.ports[n] = hp
        with IPRoute() as ipr:
            if hp.ns in netns.listnetns():          # left over by a killed run
                netns.remove(hp.ns)
            for idx in ipr.link_lookup(ifname=hp.switch_iface):
                ipr.link("del", index=idx)
            netns.create(hp.ns)
            ipr.link("add", ifname=hp.switch_iface, kind="veth", peer=hp.host_iface)
            ipr.link("set", index=ipr.link_lookup(ifname=hp.host_iface)[0], net_ns_fd=hp.ns)
            _disable_ipv6("", hp.switch_iface)
            ipr.link("set", index=ipr.link_lookup(ifname=hp.switch_iface)[0], state="up")
        with NetNS(hp.ns) as ns:
            ns.link("set", index=ns.link_lookup(ifname=hp.host_iface)[0], state="up")
        subprocess.run(["ip", "netns", "exec", hp.ns, "sysctl", "-qw",
                        f"net.ipv6.conf.{hp.host_iface}.disable_ipv6=1"], check=False)
        hp.open()
        _wait_up(hp.switch_iface)
        return hp

    def teardown(self) -> None:
        for t in self.targets:
            t.stop()
        self.targets.clear()
        with IPRoute() as ipr:
            for hp in self.ports.values():
                hp.close()
                for idx in ipr.link_lookup(ifname=hp.switch_iface):
                    ipr.link("del", index=idx)
                if hp.ns in netns.listnetns():
                    netns.remove(hp.ns)
        self.ports.clear()

    def drain(self) -> None:
        for hp in self.ports.values():
            hp.drain()

    def collect(self, timeout: float = 1.0, quiet: float = 0.15) -> list[tuple[int, bytes]]:
        """(port, frame) for every frame arriving on any host port within ``timeout``."""
        return collect_frames(list(self.ports.values()), timeout, quiet)

    # -- targets -------------------------------------------------------------------------
    def start_target(self, target: str = "softswitch", device_id: int = 1, grpc_port: int | None = None,
                     cpu_port: int = 255, extra_args: tuple[str, ...] = (), timeout: float = 20.0,
                     thrift_port: int | None = None, executable: str | None = None,
                     bmv2_log_level: str = BMV2_LOG_LEVEL) -> Target:
        """Start a P4 target (``softswitch``, ``bmv2`` or ``auto``) on all ports, ``--no-p4``,
        and wait until its P4Runtime port answers. BMv2's Thrift port defaults to
        THRIFT_PORT_BASE + device id (pass a free one when several test runs share a machine)."""
        kind, exe = resolve_target(target)
        exe = executable or exe          # e.g. an optimised BMv2 build outside PATH
        grpc_port = grpc_port or free_tcp_port()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        name = f"{self.prefix}-{kind}-{device_id}"
        ports = {n: hp.switch_iface for n, hp in self.ports.items()}
        thrift_port = thrift_port or free_tcp_port()
        cmd = target_command(kind, exe, name=name, device_id=device_id, ports=sorted(ports.items()),
                             grpc_port=grpc_port, log_dir=self.run_dir, cpu_port=cpu_port,
                             thrift_port=thrift_port, extra_args=extra_args,
                             bmv2_log_level=bmv2_log_level)
        log_path = self.run_dir / (name if kind == "bmv2" else f"{name}.log")
        if kind == "bmv2":          # its Thrift server binds every address (emulation.control_ports)
            control_ports.close([thrift_port])
        out = open(self.run_dir / f"{name}.out", "w")
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        t = Target(kind, name, f"127.0.0.1:{grpc_port}", proc, log_path, ports,
                   control_port=thrift_port if kind == "bmv2" else None)
        self.targets.append(t)
        deadline = time.monotonic() + timeout
        while not port_accepts(grpc_port):
            if proc.poll() is not None:
                raise P4SwitchError(f"{name} exited with code {proc.returncode}: "
                                    f"{tail(self.run_dir / f'{name}.out')}")
            if time.monotonic() > deadline:
                raise P4SwitchError(f"{name}: P4Runtime port {grpc_port} not answering after {timeout}s")
            time.sleep(0.05)
        return t


def collect_frames(ports: list[HostPort], timeout: float, quiet: float,
                   count: int | None = None) -> list[tuple[int, bytes]]:
    """(port number, frame) arriving on ``ports`` within ``timeout``; returns once ``count``
    frames arrived, or ``quiet`` seconds after the last frame once something arrived."""
    by_fd = {hp.sock.fileno(): hp for hp in ports}
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    while True:
        now = time.monotonic()
        if now >= deadline or (count is not None and len(got) >= count):
            return got
        wait = deadline - now if not got else min(quiet, deadline - now)
        ready, _, _ = select.select(list(by_fd), [], [], wait)
        if not ready:
            if got:
                return got
            continue
        for fd in ready:
            hp = by_fd[fd]
            while True:
                try:
                    got.append((hp.number, hp.sock.recv(65536)))
                except BlockingIOError:
                    break


def _wait_up(iface: str, timeout: float = 5.0) -> None:
    state = Path(f"/sys/class/net/{iface}/operstate")
    deadline = time.monotonic() + timeout
    while state.read_text().strip() not in ("up", "unknown") and time.monotonic() < deadline:
        time.sleep(0.02)


_recently_picked: deque[int] = deque(maxlen=256)


def free_tcp_port() -> int:
    """A TCP port free on 127.0.0.1 now and not among the last ports this process picked: a
    picked port is closed again at once, so the kernel may offer it for the next pick too (seen
    in about 1 of 300 triples), and a switch given one port for P4Runtime and for its run-time
    control then fails to serve P4Runtime."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _recently_picked:
            _recently_picked.append(port)
            return port
