"""How frames reach simple_switch's ports and come back, for the STF runner's BMv2 target.

VethPorts (as root): a veth pair per port; simple_switch is given one end, the runner sends
and captures raw frames on the other, in a network namespace of its own. A frame is through the switch before the next command
runs (settle waits until the ports have been quiet a moment), so a table write or a counter
check between packets sees exactly the packets before it.

PcapPorts (without root, as p4c's own runner): simple_switch ``--use-files``, a pcap FIFO in
and a pcap file out per port. BMv2 reads one packet ahead from every open input before it
takes the earliest, so with packets sent on several ports a packet may still be unread when a
later command runs; only the frames at the end of the test are certain.
"""
from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path

from softswitch.stf.errors import Unsupported

from . import pcap

QUIET_S = 0.1          # no frame for this long: what the switch had to send has left
SETTLE_TIMEOUT_S = 3.0


class VethPorts:
    """A veth pair per port: the switch's end in this namespace, the other in a namespace of
    the run's own (nothing else on the machine sends into it), a raw socket on it
    (emulation.testbed's HostPort)."""

    def __init__(self, ports: list[int], prefix: str):
        from pyroute2 import IPRoute, NetNS, netns

        from emulation.testbed import HostPort
        self.ports, self.prefix, self.links, self.host_ports = ports, prefix, [], {}
        self.ns = f"{prefix}n"
        self.out: dict[int, list[bytes]] = {}
        self.last_port: int | None = None
        try:
            if self.ns in netns.listnetns():         # left over by a killed run
                netns.remove(self.ns)
            netns.create(self.ns)
            self._ns_sysctl("default")
            with IPRoute() as ipr, NetNS(self.ns) as ns:
                for p in ports:
                    sw, host = f"{prefix}s{p}", f"{prefix}h{p}"
                    for idx in ipr.link_lookup(ifname=sw):
                        ipr.link("del", index=idx)
                    ipr.link("add", ifname=sw, kind="veth", peer=host)
                    self.links.append(sw)
                    ipr.link("set", index=ipr.link_lookup(ifname=host)[0], net_ns_fd=self.ns)
                    # no router solicitations or MLD on the test link
                    Path(f"/proc/sys/net/ipv6/conf/{sw}/disable_ipv6").write_text("1")
                    self._ns_sysctl(host)
                    ipr.link("set", index=ipr.link_lookup(ifname=sw)[0], state="up")
                    ns.link("set", index=ns.link_lookup(ifname=host)[0], state="up")
            for p in ports:
                hp = HostPort(p, f"{prefix}s{p}", f"{prefix}h{p}", self.ns)
                hp.open()
                self.host_ports[p] = hp
        except BaseException:
            self.close()
            raise

    def _ns_sysctl(self, iface: str) -> None:
        """IPv6 off on ``iface`` in the namespace before it goes up: the kernel would send MLD
        reports and router solicitations into the switch, which the program may forward."""
        subprocess.run(["ip", "netns", "exec", self.ns, "sysctl", "-qw", f"net.ipv6.conf.{iface}.disable_ipv6=1"],
                       check=True)

    def switch_args(self) -> list[str]:
        return [a for p in self.ports for a in ("-i", f"{p}@{self.prefix}s{p}")]

    def started(self, check_alive) -> None:
        return None

    def send(self, port: int, frame: bytes) -> None:
        # BMv2 takes each port's frames in a thread of its own: a frame on another port than
        # the last could overtake it; it goes once the last has left
        if self.last_port is not None and port != self.last_port:
            self.settle()
        self.last_port = port
        self.host_ports[port].send(frame)

    def _collect(self, quiet: float) -> None:
        """Frames until the ports have been quiet for ``quiet`` seconds (at most SETTLE_TIMEOUT_S)."""
        from emulation.testbed import collect_frames
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            got = collect_frames(list(self.host_ports.values()), quiet, quiet)
            for p, frame in got:
                self.out.setdefault(p, []).append(frame)
            if not got:
                return

    def settle(self) -> None:
        self._collect(QUIET_S)

    def finish(self, stop) -> dict[int, list[bytes]]:
        self._collect(QUIET_S * 2)
        stop()
        return self.out

    def close(self) -> None:
        from pyroute2 import IPRoute, netns
        for hp in self.host_ports.values():
            hp.close()
        self.host_ports = {}
        with IPRoute() as ipr:
            for sw in self.links:
                for idx in ipr.link_lookup(ifname=sw):
                    ipr.link("del", index=idx)
        self.links = []
        if self.ns in netns.listnetns():
            netns.remove(self.ns)


class PcapPorts:
    DRAIN_S = 1.0       # after the inputs are closed, before the switch is stopped and its files read

    def __init__(self, ports: list[int], senders: set[int], directory: Path, start_timeout: float):
        self.ports, self.senders, self.dir, self.start_timeout = ports, senders, directory, start_timeout
        self.fifos: dict[int, int] = {}
        for p in ports:
            os.mkfifo(directory / f"pcap{p}_in.pcap")

    def switch_args(self) -> list[str]:
        return ["--use-files", "0", *[a for p in self.ports for a in ("-i", f"{p}@pcap{p}")]]

    def started(self, check_alive) -> None:
        """Open every input FIFO for writing: the switch opens them one by one, in port order;
        a non-blocking open fails (ENXIO) until it has opened that one for reading. The input
        of a port no packet is sent on is closed at once (else it would hold back the others)."""
        deadline = time.monotonic() + self.start_timeout
        for p in self.ports:
            path = self.dir / f"pcap{p}_in.pcap"
            while True:
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                    break
                except OSError as e:
                    if e.errno != errno.ENXIO:
                        raise
                check_alive()
                if time.monotonic() > deadline:
                    raise Unsupported(f"simple_switch did not open port {p}'s input within {self.start_timeout:g} s")
                time.sleep(0.01)
            os.set_blocking(fd, True)
            os.write(fd, pcap.HEADER)
            if p in self.senders:
                self.fifos[p] = fd
            else:
                os.close(fd)

    def send(self, port: int, frame: bytes) -> None:
        os.write(self.fifos[port], pcap.record(frame))

    def settle(self) -> None:
        time.sleep(QUIET_S)

    def finish(self, stop) -> dict[int, list[bytes]]:
        self.close()
        time.sleep(self.DRAIN_S)
        stop()
        out = {}
        for p in self.ports:
            f = self.dir / f"pcap{p}_out.pcap"
            frames = pcap.read_frames(f.read_bytes()) if f.exists() else []
            if frames:
                out[p] = frames
        return out

    def close(self) -> None:
        for fd in self.fifos.values():
            os.close(fd)
        self.fifos = {}
