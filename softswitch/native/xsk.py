"""Which port I/O the native data plane's ports use, AF_XDP or AF_PACKET, and why.

Modes (``softswitch --port-io``, ``SOFTSWITCH_PORT_IO``):

    auto     the default: each port of a natively run program on an AF_XDP socket where the
             kernel gives one on its interface (an XDP program redirecting the interface's frames
             to it; copy mode on a veth, which has no zero-copy), else on its AF_PACKET socket,
             the reason logged, counted and shown by softswitch-ctl's ``packet_path``.
    af_xdp   AF_XDP on every port of a natively run program, or the data plane does not start,
             saying which port and why (tests, benchmarks).
    packet   the AF_PACKET sockets alone (recvmmsg/sendmmsg): the port I/O of the Python path.

The Python and compiled packet paths read AF_PACKET sockets whatever the mode. A port keeps its
AF_PACKET socket beside its AF_XDP one: what XDP passes on to the kernel (a frame of another
queue; every frame while a program change replaces one data plane by the next, which closes
its AF_XDP sockets before the next opens its own) is read there, so nothing is lost between.

What the C side does (native/xsk.c) is opened per port when a native data plane starts
(``open_ports``); when the interface is taken, an XDP program left on it by something else
(attached the old way, by netlink: ours is attached by a BPF link, which the kernel detaches when
the process ends however it ends) is replaced, and one a live process holds by a link, or a
socket of a process that is ending, is waited for a moment.
"""
from __future__ import annotations

import ctypes
import errno
import logging
import time
from dataclasses import dataclass

from ..ports import Port

log = logging.getLogger("softswitch.native")

MODES = ("auto", "af_xdp", "packet")
DEFAULT_MODE = "auto"
WHY_CAP = 512
BUSY_WAIT_S = 2.0           # a killed switch's link and socket go within milliseconds: a restart waits for them
# a mode's program id in the kernel's IFLA_XDP, the mode and its XDP_FLAGS_* (linux/if_link.h)
XDP_MODES = {"IFLA_XDP_DRV_PROG_ID": ("driver", 1 << 2), "IFLA_XDP_SKB_PROG_ID": ("generic", 1 << 1),
             "IFLA_XDP_HW_PROG_ID": ("offloaded", 1 << 3)}
PORT_IO_STATE = {0: "packet", 1: "af_xdp", 2: "gone"}     # ss_dp_port_io


class PortIOUnavailable(Exception):
    """``--port-io af_xdp`` and a port cannot have an AF_XDP socket; the message says which and why."""


class XskInfo(ctypes.Structure):
    _fields_ = [("zero_copy", ctypes.c_int32), ("generic", ctypes.c_int32), ("frame_size", ctypes.c_uint32),
                ("max_frame", ctypes.c_uint32), ("rx_dropped", ctypes.c_uint64), ("tx_waiting", ctypes.c_uint64)]


@dataclass(frozen=True)
class PortIO:
    """How one port's frames go: ``kind`` "af_xdp" or "packet", ``detail`` the AF_XDP mode or
    why not AF_XDP."""
    kind: str
    detail: str

    def describe(self) -> str:
        return f"{self.kind} ({self.detail})" if self.kind == "af_xdp" else f"{self.kind}: {self.detail}"


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"port I/O mode '{mode}' is not one of {', '.join(MODES)}")
    return mode


def declare(lib: ctypes.CDLL) -> None:
    P, i32, u32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32
    for name, res, args in (("ss_dp_open_xsk", i32, [P, i32, i32, ctypes.c_char_p, u32]),
                            ("ss_dp_close_xsks", None, [P]),
                            ("ss_dp_port_io", i32, [P, i32, ctypes.POINTER(XskInfo)]),
                            ("ss_xsk_program_name", i32, [u32, ctypes.c_char_p, ctypes.c_size_t])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


def open_ports(lib: ctypes.CDLL, handle: int, ports: dict[int, Port], mode: str) -> dict[int, PortIO]:
    """Each port's AF_XDP socket opened on its interface (mode auto or af_xdp) before the loop
    starts: how each port's frames go. PortIOUnavailable (af_xdp) naming the port that cannot,
    the sockets opened before it closed again."""
    if mode == "packet":
        return {n: PortIO("packet", "--port-io packet") for n in ports}
    out = {}
    for number, port in sorted(ports.items()):
        why = _open(lib, handle, number, port.iface)
        if why is None:
            out[number] = PortIO("af_xdp", _mode_of(lib, handle, number))
            continue
        out[number] = PortIO("packet", f"AF_XDP on {port.iface}: {why}")
        if mode == "af_xdp":
            lib.ss_dp_close_xsks(handle)
            raise PortIOUnavailable(f"port {number}: AF_XDP on {port.iface}: {why}")
        log.warning("port %d runs on its AF_PACKET socket: AF_XDP on %s: %s", number, port.iface, why)
    return out


def _open(lib: ctypes.CDLL, handle: int, number: int, iface: str) -> str | None:
    """None once the port's AF_XDP socket is open, else why not. The attach finding the interface
    taken (EBUSY, EEXIST: a program there already, or the queue bound) has a leftover replaced, or
    waits a moment for a process that is ending to let go (BUSY_WAIT_S)."""
    deadline = time.monotonic() + BUSY_WAIT_S
    while True:
        buf = ctypes.create_string_buffer(WHY_CAP)
        try:
            err = lib.ss_dp_open_xsk(handle, number, _ifindex(iface), buf, WHY_CAP)
        except OSError as e:
            return str(e)
        if err == 0:
            return None
        why = buf.value.decode(errors="replace")
        if err not in (errno.EBUSY, errno.EEXIST):
            return why
        try:
            replaced = replace_leftover(lib, iface)
        except LeftoverHeld as e:
            replaced, why = False, str(e)
        except OSError as e:
            return str(e)
        if time.monotonic() >= deadline:
            return why
        if not replaced:
            time.sleep(0.05)


def _mode_of(lib: ctypes.CDLL, handle: int, number: int) -> str:
    info = XskInfo()
    lib.ss_dp_port_io(handle, number, ctypes.byref(info))
    mode = "zero-copy mode" if info.zero_copy else "copy mode"
    return mode + (", generic XDP" if info.generic else "")


def port_states(lib: ctypes.CDLL, handle: int, ports: dict[int, PortIO]) -> dict[int, PortIO]:
    """``ports`` as they are now: an AF_XDP port whose interface was removed says so."""
    out = dict(ports)
    for number, io in ports.items():
        if io.kind == "af_xdp" and PORT_IO_STATE.get(lib.ss_dp_port_io(handle, number, ctypes.byref(XskInfo()))) == "gone":
            out[number] = PortIO("packet", "its interface was removed: AF_XDP socket closed")
    return out


def kernel_drops(lib: ctypes.CDLL, handle: int, number: int) -> int:
    """Frames the kernel dropped before an AF_XDP port read them (no free frame, RX ring full)."""
    info = XskInfo()
    return info.rx_dropped if lib.ss_dp_port_io(handle, number, ctypes.byref(info)) == 1 else 0


def describe(ports: dict[int, PortIO], ifaces: dict[int, str]) -> str:
    """One line for softswitch-ctl's packet_path: what every port runs, or each kind with the
    ports it has and, for AF_PACKET ports, why."""
    kinds = {io.describe() for io in ports.values()}
    if len(kinds) == 1:
        return kinds.pop()
    return "; ".join(f"{ifaces.get(n, n)}: {io.describe()}" for n, io in sorted(ports.items()))


class PortIOChoice:
    """A switch's port I/O mode and what its data planes made of it: how each port's frames go
    now, and how many times a port that was to have an AF_XDP socket ran on its AF_PACKET socket
    instead (since the switch started; a program change starts a new data plane)."""

    def __init__(self, mode: str = DEFAULT_MODE):
        self.mode = check_mode(mode)
        self.fallbacks = 0

    def started(self, dp) -> None:
        """``dp`` started (it opened its AF_XDP sockets, if it is native)."""
        if self.mode != "packet":
            self.fallbacks += sum(io.kind == "packet" for io in getattr(dp, "port_io", {}).values())

    def status(self, dp) -> dict:
        """For softswitch-ctl's packet_path."""
        if hasattr(dp, "port_io_status"):
            ports = dp.port_io_status()
        else:
            ports = {n: PortIO("packet", "the Python packet path reads AF_PACKET sockets") for n in dp.ports}
        ifaces = {n: p.iface for n, p in dp.ports.items() if p is not None}
        return {"port_io_mode": self.mode, "port_io": describe(ports, ifaces) if ports else "no ports",
                "port_io_ports": {ifaces.get(n, str(n)): io.describe() for n, io in sorted(ports.items())},
                "port_io_fallbacks": self.fallbacks}


# ---- an XDP program left on an interface ----------------------------------------------------
class LeftoverHeld(OSError):
    """An XDP program on the interface is held by a BPF link (a live process's, or one ending)."""


def attached_programs(iface: str) -> list[tuple[str, int, int]]:
    """The XDP programs on ``iface``: (mode, XDP_FLAGS_* of the mode, program id)."""
    from pyroute2 import IPRoute
    with IPRoute() as ipr:
        links = ipr.link("get", ifname=iface)
    xdp = links[0].get_attr("IFLA_XDP") if links else None
    if xdp is None:
        return []
    return [(mode, flags, xdp.get_attr(attr)) for attr, (mode, flags) in XDP_MODES.items() if xdp.get_attr(attr)]


def replace_leftover(lib: ctypes.CDLL, iface: str) -> bool:
    """Any XDP program on ``iface`` detached (logged, naming it), so ours can take its place:
    one attached by netlink outlives its process (a crash of a tool that attached it so). True
    when there was one. One a BPF link holds cannot be detached here: LeftoverHeld (the caller
    waits a moment for a process that is ending, then gives up saying so)."""
    found = attached_programs(iface)
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError
    for mode, flags, prog_id in found:
        name = ctypes.create_string_buffer(32)
        named = f"'{name.value.decode()}' " if lib.ss_xsk_program_name(prog_id, name, 32) == 0 else ""
        try:
            with IPRoute() as ipr:
                ipr.link("set", index=_ifindex(iface), xdp={"attrs": [("IFLA_XDP_FD", -1), ("IFLA_XDP_FLAGS", flags)]})
        except NetlinkError as e:
            if e.code == errno.EBUSY:
                raise LeftoverHeld(f"the XDP program {named}(id {prog_id}) on {iface} is held by a BPF link "
                                   f"(another process's)") from None
            raise OSError(e.code, f"the XDP program {named}(id {prog_id}) on {iface} cannot be detached: "
                                  f"{e}") from None
        log.warning("replaced the XDP program %s(id %d, %s mode) left on %s", named, prog_id, mode, iface)
    return bool(found)


def _ifindex(iface: str) -> int:
    import socket
    try:
        return socket.if_nametoindex(iface)
    except OSError:
        raise OSError(errno.ENODEV, f"interface {iface} does not exist") from None
