"""What a fabric's bring-up needs in memory, and how many switches one softswitch process serves.

A softswitch in a process of its own pays for the interpreter, gRPC and the libraries again;
served with others by one process (``softswitch group``, `emulation.switch_group`) it pays for
its own state only. One process a switch keeps switches apart (a failure injected into one
switch kills that switch alone), so it is the choice while that takes at most half the available
memory; a larger fabric is served by groups of GROUP_SIZE. Figures: proportional set size (shared
pages split among their users) of the fabric program on the native data path with the controller's routes,
measured by benchmarks/scale.py on fat-trees (README, "How far one machine goes"): 49 MiB a switch
in a process of its own at k = 4, 8 and 16; in groups of 32, 13.4 MiB a switch at k=4 (one
process of 20), 12.3 at k=8 (3 processes) and k=16 (10), which a group's 60 MiB and 11 MiB a
switch cover; a k=16 fat-tree dropped MemAvailable by 17.5 GiB a process a switch, 5.8 in groups.

A softswitch port read through an AF_XDP socket (softswitch's --port-io, auto by default) pins
its frames: XSK_PORT_MIB a port (softswitch/native/xsk.c: 2,048 frames of 2 KiB), 0.3 GiB for
a k=4 fat-tree's 80 switch ports but 20 GiB for a k=16 one's 5,120. The switches of a fabric
that would not fit in OWN_PROCESSES_SHARE of the available memory so read their ports through
AF_PACKET sockets (``port_io`` "packet"), which take memory only for the frames waiting in them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

OWN_PROCESS_MIB = 50        # a softswitch in a process of its own
GROUP_BASE_MIB = 60         # a group process before its switches
GROUPED_SWITCH_MIB = 11     # each switch a group serves
BMV2_SWITCH_MIB = 40        # simple_switch_grpc
# A Mininet host: a `bash --norc` shell (3.3 MiB RSS, mostly shared with the other shells) in
# its own network namespace with one veth pair; rounded up for the kernel's side.
HOST_MIB = 2
XSK_PORT_MIB = 4            # an AF_XDP port's pinned UMEM: 2,048 frames of 2 KiB
GROUP_SIZE = 32             # switches a group serves when the fabric is grouped
# One process a switch while that takes at most this share of the available memory: a k=16
# fat-tree so (320 processes) fits a 24 GiB machine too, but leaves it 5 GiB and takes half as
# long again to come up as in groups (256 s against 171 s)
OWN_PROCESSES_SHARE = 0.5


@dataclass(frozen=True)
class MemoryPlan:
    switches: int
    hosts: int
    target: str                 # softswitch or bmv2
    switches_per_process: int
    ports: int = 0              # the switches' ports (link ends, the telemetry and heartbeat ports)
    port_io: str = "auto"       # softswitch's --port-io: auto (AF_XDP where it can) or packet

    @property
    def processes(self) -> int:
        return math.ceil(self.switches / self.switches_per_process)

    @property
    def need_mib(self) -> int:
        if self.target == "bmv2":
            switches = self.switches * BMV2_SWITCH_MIB
        elif self.switches_per_process == 1:
            switches = self.switches * OWN_PROCESS_MIB
        else:
            switches = self.processes * GROUP_BASE_MIB + self.switches * GROUPED_SWITCH_MIB
        return switches + self.hosts * HOST_MIB + math.ceil(self.ports * self.port_mib)

    @property
    def port_mib(self) -> float:
        """What one switch port takes beyond its switch: AF_XDP's pinned frames, else nothing."""
        return XSK_PORT_MIB if self.target == "softswitch" and self.port_io != "packet" else 0.0

    def describe(self) -> str:
        served = ("a process each" if self.switches_per_process == 1 else
                  f"{self.switches_per_process} a process, {self.processes} processes")
        io = f", AF_XDP on {self.ports} ports" if self.ports and self.port_mib else ""
        return f"{self.switches} switches ({served}{io}) and {self.hosts} hosts need about {gib(self.need_mib)}"


def plan(switches: int, hosts: int, target: str, available_mib: int,
         switches_per_process: int | None = None, ports: int = 0) -> MemoryPlan:
    """The fabric's plan: ``switches_per_process`` as given, or (None) one process a switch when
    that takes at most OWN_PROCESSES_SHARE of ``available_mib``, else groups of GROUP_SIZE
    (softswitch only); its ``ports`` on AF_XDP (port_io "auto") while the plan with their frames
    takes at most that share too, else on AF_PACKET sockets ("packet")."""
    if switches_per_process is not None:
        if switches_per_process < 1:
            raise ValueError(f"switches per process must be 1 or more, not {switches_per_process}")
        if switches_per_process > 1 and target != "softswitch":
            raise ValueError(f"only softswitch serves several switches in one process, not {target}")
        chosen = MemoryPlan(switches, hosts, target, switches_per_process)
    else:
        chosen = MemoryPlan(switches, hosts, target, 1)
        if target == "softswitch" and chosen.need_mib > OWN_PROCESSES_SHARE * available_mib:
            chosen = MemoryPlan(switches, hosts, target, min(GROUP_SIZE, switches))
    with_ports = MemoryPlan(switches, hosts, target, chosen.switches_per_process, ports)
    if with_ports.need_mib <= OWN_PROCESSES_SHARE * available_mib:
        return with_ports
    return MemoryPlan(switches, hosts, target, chosen.switches_per_process, ports, "packet")


def check(what: str, fabric: MemoryPlan, available_mib: int) -> None:
    """ValueError with the estimate when ``fabric`` needs more than ``available_mib``."""
    if fabric.need_mib > available_mib:
        raise ValueError(f"{what}: {fabric.describe()}, this machine has {gib(available_mib)} available")


def mem_available_mib() -> int:
    """MemAvailable from /proc/meminfo, in MiB."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    raise OSError("/proc/meminfo has no MemAvailable line")


def gib(mib: int) -> str:
    return f"{mib / 1024:.0f} GiB" if mib >= 10 * 1024 else f"{mib / 1024:.1f} GiB"
