"""A Mininet switch node that runs a P4Runtime target: BMv2 ``simple_switch_grpc`` or ``softswitch``.

Modelled on Mininet's own switch classes: ``start()`` launches the target process for the
switch's ports and returns, ``batchStartup()`` (called by ``Mininet.start()``) waits until every
target's gRPC port accepts a TCP connection, ``connected()`` is the readiness check, ``stop()``
terminates the process (SIGTERM, then SIGKILL) and deletes the switch's interfaces. Switch nodes
live in the root namespace; link interfaces are ``<switch>-eth<port>`` and the Mininet port number
is the P4 port number given to the target with ``-i PORT@IFACE``. With
``heartbeat_generator=True`` the switch has one more port, 254, on ``<switch>-eth254``: the
link-heartbeat generator's (`topologies.heartbeat_generator`), created at the first start.

Command lines (``--target auto`` picks ``simple_switch_grpc`` when it is on PATH, else
``softswitch``)::

    simple_switch_grpc --device-id N -i 1@p0e0-eth1 ... --no-p4 --thrift-port T \
        --log-file <log_dir>/<name> --log-level info -- --grpc-server-addr 127.0.0.1:PORT --cpu-port 255 \
        --priority-queues 8
    softswitch --device-id N -i 1@p0e0-eth1 ... --no-p4 \
        --grpc-server-addr 127.0.0.1:PORT --cpu-port 255 --priority-queues 8 --log-file <log_dir>/<name>.log \
        --runtime-addr 127.0.0.1:T

T, the run-time control port (BMv2's Thrift server, softswitch's ``--runtime-addr``), is
16000 + device id for both, so ``set_queue_rate()``/``set_queue_depth()`` reach either target
(``simple_switch_CLI --thrift-port T``, run with this project's Python by `topologies.bmv2_cli`
whatever ``python3`` comes first on PATH / ``softswitch-ctl --addr 127.0.0.1:T``).

No control port is open to other machines. The P4Runtime servers of both targets and
softswitch's run-time control server listen on 127.0.0.1. BMv2's Thrift server listens on every
address and has no option to do otherwise, so `start()` first closes T to every interface but
loopback with the lab's nftables table (`topologies.control_ports`), and the port is reopened
when the target has stopped; `cleanup()` reopens ports nothing listens on any more.

BMv2 writes its log to ``<log_dir>/<name>.txt``, at ``info`` (start-up, tables, errors): at
``trace`` it writes lines for every packet at every table, which costs more than the packet itself
(a fabric switch forwards several times fewer packets); ``AIFABRIC_BMV2_LOG_LEVEL=trace`` turns
the per-packet trace back on (flushed line by line) for debugging a P4 program. A target's stdout/stderr goes to
``<log_dir>/<name>.console``. Each started process is recorded in ``<run_dir>/pids/<name>.pid``; `cleanup()` kills what aifabric
started and deletes leftover fabric interfaces and Mininet node shells, without touching OVS.

Every process a lab starts carries the lab's markers in its environment (`topologies.procs`):
the targets, and through `MarkedNode` the node shells and whatever runs in them. `cleanup()`
finds a lab's processes by them (also by pid file and by log file under the run directory),
kills them all at once with one deadline, kills every process left in a fabric host's network
namespace (so the namespace goes), deletes the interfaces in one netlink session, and repeats
until `leftovers()` finds nothing; `leftovers()` alone is the check, touching nothing.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from mininet.log import debug, info, warn
from mininet.node import Switch

from topologies import addressing as ap
from topologies import control_ports
from topologies import heartbeat_generator as hbgen
from topologies.bmv2_cli import BMV2_CLI, Bmv2CliError, run_cli
from topologies.procs import (Proc, interfaces_in_netns_of, listening_tcp_ports, marked_env, own_netns,
                              snapshot, stop_processes)

RUN_DIR = Path(os.environ.get("AIFABRIC_RUN_DIR", "/tmp/aifabric"))
BMV2 = "simple_switch_grpc"
SOFTSWITCH = "softswitch"
TARGETS = ("auto", "bmv2", "softswitch")
# BMv2's Thrift server: 16000 + device id. Its default (9090) would clash between switches, and
# the base keeps every valid id (<= 15535) below Linux's ephemeral port range (32768-60999), so an
# outgoing connection cannot be holding the port when BMv2 binds it.
THRIFT_PORT_BASE = 16000
BMV2_LOG_LEVEL = os.environ.get("AIFABRIC_BMV2_LOG_LEVEL", "info")
# Egress queues per port, served by standard_metadata.priority, highest first: all eight that
# v1model's 3-bit priority names. fabric.p4 sends packet-outs (heartbeats) at priority 7, so
# they pass data queued on a congested link, as BFD's packets do on a switch.
PRIORITY_QUEUES = 8


class P4SwitchError(RuntimeError):
    """A target that could not be started or did not come up; the message names the switch."""


def resolve_target(target: str = "auto") -> tuple[str, str]:
    """(kind, executable) for ``auto``/``bmv2``/``softswitch``; P4SwitchError when missing."""
    if target not in TARGETS:
        raise P4SwitchError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    if target in ("auto", "bmv2"):
        path = shutil.which(BMV2)
        if path:
            return "bmv2", path
        if target == "bmv2":
            raise P4SwitchError(f"target bmv2: {BMV2} is not on PATH")
    path = shutil.which(SOFTSWITCH) or _venv_script(SOFTSWITCH)
    if path:
        return "softswitch", path
    raise P4SwitchError(
        f"target {target}: neither {BMV2} nor {SOFTSWITCH} found (PATH, or {Path(sys.executable).parent})"
    )


def _venv_script(name: str) -> str | None:
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None


def target_command(
    kind: str,
    executable: str,
    *,
    name: str,
    device_id: int,
    ports: Sequence[tuple[int, str]],
    grpc_port: int,
    log_dir: Path,
    cpu_port: int = ap.CPU_PORT,
    thrift_port: int | None = None,
    extra_args: Sequence[str] = (),
    runtime_port: int | None = None,
    grpc_host: str = ap.GRPC_HOST,
    bmv2_log_level: str = BMV2_LOG_LEVEL,
) -> list[str]:
    """The command line that starts switch ``name`` (see the module docstring); BMv2's Thrift
    port defaults to THRIFT_PORT_BASE + device id; softswitch gets ``--runtime-addr`` only when
    ``runtime_port`` is given; the P4Runtime server listens on ``grpc_host`` (0.0.0.0 in a
    container of its own); BMv2 logs at ``bmv2_log_level`` (``off``: nothing, a benchmark's best case)."""
    cmd = [executable, "--device-id", str(device_id)]
    for port, intf in ports:
        cmd += ["-i", f"{port}@{intf}"]
    cmd.append("--no-p4")
    server = ["--grpc-server-addr", f"{grpc_host}:{grpc_port}", "--cpu-port", str(cpu_port),
              "--priority-queues", str(PRIORITY_QUEUES)]
    if kind == "bmv2":
        cmd += ["--thrift-port", str(thrift_port or THRIFT_PORT_BASE + device_id)]
        cmd += ["--log-file", str(log_dir / name), "--log-level", bmv2_log_level]
        if bmv2_log_level in ("trace", "debug"):
            cmd.append("--log-flush")            # each packet's lines there when the packet is
        cmd += extra_args
        cmd += ["--", *server]          # the target's own options, after simple_switch's
    else:
        cmd += server
        cmd += ["--log-file", str(log_dir / f"{name}.log")]
        if runtime_port is not None:
            cmd += ["--runtime-addr", f"{ap.GRPC_HOST}:{runtime_port}"]
        cmd += list(extra_args)
    return cmd


def port_accepts(port: int, host: str = ap.GRPC_HOST, timeout: float = 0.2) -> bool:
    """True when something accepts TCP connections on host:port.

    A connection to itself is not: where nothing listens on a port of the ephemeral range,
    Linux may give the probing socket that very port, and the connect succeeds (TCP
    simultaneous open). Taken for a target's server, it also held the port the target was
    binding: the target failed to start, and the caller waited on a server that never came."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            return s.getsockname() != s.getpeername()
    except OSError:
        return False


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path} not readable)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


class MarkedNode:
    """Mixin for Mininet nodes: every process the node starts (its shell, ``popen``) carries the
    lab markers of `topologies.procs`, so `cleanup()` finds all of them."""

    name: str

    def _popen(self, cmd: list[str], **params: object):  # type: ignore[no-untyped-def]
        params["env"] = marked_env(RUN_DIR, self.name, params.get("env"))  # type: ignore[arg-type]
        return super()._popen(cmd, **params)  # type: ignore[misc]


class P4Switch(MarkedNode, Switch):
    """Mininet switch node backed by a P4Runtime target process (one per switch)."""

    def __init__(
        self,
        name: str,
        device_id: int | None = None,
        grpc_port: int | None = None,
        target: str = "auto",
        log_dir: str | Path | None = None,
        cpu_port: int = ap.CPU_PORT,
        start_timeout: float = 60.0,
        stop_timeout: float = 5.0,
        thrift_port: int | None = None,
        extra_args: Sequence[str] = (),
        heartbeat_generator: bool = False,
        **params: object,
    ) -> None:
        params["inNamespace"] = False
        if device_id is None:
            nums = re.findall(r"\d+", name)
            raise P4SwitchError(f"switch {name}: a device_id is required (got none; digits in name: {nums})")
        self.device_id = int(device_id)
        self.grpc_port = int(grpc_port) if grpc_port is not None else ap.grpc_port(self.device_id)
        self.target_kind, self.executable = resolve_target(target)
        self.log_dir = Path(log_dir) if log_dir is not None else RUN_DIR / "logs"
        self.cpu_port = cpu_port
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.extra_args = tuple(extra_args)
        # one more port, GEN_PORT, on a veth of its own for the link-heartbeat generator
        self.heartbeat_generator = heartbeat_generator
        self.thrift_port = thrift_port or THRIFT_PORT_BASE + self.device_id
        self.process: subprocess.Popen | None = None
        self._console: object | None = None
        # queue settings applied so far, in order: a restarted target gets them again (`restart_target`)
        self.queue_settings: list[str] = []
        params.setdefault("dpid", f"{self.device_id:x}")
        Switch.__init__(self, name, **params)

    # --- files -----------------------------------------------------------------------------

    @property
    def log_file(self) -> Path:
        """The target's own log file (BMv2 appends ``.txt`` to the ``--log-file`` it is given)."""
        return self.log_dir / (f"{self.name}.txt" if self.target_kind == "bmv2" else f"{self.name}.log")

    @property
    def console_file(self) -> Path:
        """stdout/stderr of the target process."""
        return self.log_dir / f"{self.name}.console"

    @property
    def pid_file(self) -> Path:
        return RUN_DIR / "pids" / f"{self.name}.pid"

    def log_tail(self, lines: int = 15) -> str:
        parts = []
        for path in (self.log_file, self.console_file):
            if path.exists() and path.stat().st_size:
                parts.append(f"--- {path} ---\n{tail(path, lines)}")
        return "\n".join(parts) or f"(no output in {self.log_file} or {self.console_file})"

    # --- Mininet node API ------------------------------------------------------------------

    def data_ports(self) -> list[tuple[int, str]]:
        """(port number, interface name) of the data-plane interfaces, by port."""
        return sorted(
            (port, intf.name) for port, intf in self.intfs.items() if intf.name != "lo" and port != 0
        )

    def target_ports(self) -> list[tuple[int, str]]:
        """The data ports and, with a heartbeat generator, its port."""
        extra = [(hbgen.GEN_PORT, hbgen.switch_interface(self.name))] if self.heartbeat_generator else []
        return self.data_ports() + extra

    def command(self) -> list[str]:
        return target_command(
            self.target_kind,
            self.executable,
            name=self.name,
            device_id=self.device_id,
            ports=self.target_ports(),
            grpc_port=self.grpc_port,
            log_dir=self.log_dir,
            cpu_port=self.cpu_port,
            thrift_port=self.thrift_port,
            extra_args=self.extra_args,
            runtime_port=self.thrift_port,
        )

    # --- run-time control (queue rate and depth) -------------------------------------------

    @property
    def runtime_address(self) -> str:
        """``host:port`` of the run-time control server (BMv2 Thrift / softswitch --runtime-addr)."""
        return f"{ap.GRPC_HOST}:{self.thrift_port}"

    def runtime_command(self, command: str) -> str:
        """Run one simple_switch_CLI-style command (``set_queue_rate 100 2``) on the target;
        P4SwitchError naming the switch and the command when it fails."""
        if self.target_kind == "bmv2":
            try:
                return run_cli(self.thrift_port, [command])
            except Bmv2CliError as err:
                raise P4SwitchError(f"switch {self.name}: {err}") from None
        from softswitch.ctl import send_command

        try:
            answer = send_command(self.runtime_address, command)
        except OSError as err:
            raise P4SwitchError(f"switch {self.name}: runtime control {self.runtime_address} unreachable: {err}") from None
        if answer.startswith("error"):
            raise P4SwitchError(f"switch {self.name}: {command!r}: {answer}")
        return answer

    def set_queue_rate(self, rate_pps: int, port: int | None = None) -> None:
        """Egress queue rate in packets per second (0: unlimited) of ``port`` (all ports: None)."""
        self._queue_setting(f"set_queue_rate {rate_pps}" + (f" {port}" if port is not None else ""))

    def set_queue_depth(self, depth_pkts: int, port: int | None = None) -> None:
        """Egress queue depth in packets of ``port`` (all ports: None)."""
        self._queue_setting(f"set_queue_depth {depth_pkts}" + (f" {port}" if port is not None else ""))

    def _queue_setting(self, command: str) -> None:
        self.runtime_command(command)
        self.queue_settings.append(command)

    def restart_target(self, timeout: float | None = None) -> None:
        """Start a target that died (or was killed) again with the same command line, wait until
        it is ready and apply the queue settings it had; its pipeline and tables are the
        controller's to push again. P4SwitchError when it is still running or does not come up."""
        if self.process is not None and self.process.poll() is None:
            raise P4SwitchError(f"switch {self.name}: target pid {self.process.pid} is still running")
        self.forget_target()
        self.start()
        self.wait_ready(timeout)
        for command in self.queue_settings:
            self.runtime_command(command)

    def start(self, controllers: Iterable[object] = ()) -> None:
        """Prepare the interfaces and launch the target (does not wait; see `wait_ready`)."""
        if self.process is not None and self.process.poll() is None:
            return
        if port_accepts(self.grpc_port):
            raise P4SwitchError(
                f"switch {self.name}: gRPC port {ap.GRPC_HOST}:{self.grpc_port} is already in use "
                f"(a leftover target? run `aifabric clean`)"
            )
        if port_accepts(self.thrift_port):
            raise P4SwitchError(
                f"switch {self.name}: run-time control port {self.thrift_port} is already in use "
                f"(another target with device id {self.device_id}? pass thrift_port=)"
            )
        if self.heartbeat_generator and not Path(f"/sys/class/net/{hbgen.switch_interface(self.name)}").exists():
            hbgen.add_link(self.name)     # kept over restarts: the generator stays bound to its end
        for _, intf in self.target_ports():
            prepare_switch_interface(intf)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        if self.target_kind == "bmv2":     # its Thrift server binds every address: close the port first
            try:
                control_ports.close([self.thrift_port])
            except control_ports.ControlPortError as err:
                raise P4SwitchError(f"switch {self.name}: Thrift port {self.thrift_port}: {err}") from None
        cmd = self.command()
        info(f"{self.name}: {' '.join(cmd)}\n")
        console = open(self.console_file, "wb")
        self._console = console
        self.process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, start_new_session=True,
            env=marked_env(RUN_DIR, self.name),
        )
        self.pid_file.write_text(f"{self.process.pid}\n{' '.join(cmd)}\n")

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until the gRPC port accepts connections; P4SwitchError (with the log's last
        lines) when the process dies or the timeout passes."""
        timeout = self.start_timeout if timeout is None else timeout
        if self.process is None:
            raise P4SwitchError(f"switch {self.name}: not started")
        deadline = time.monotonic() + timeout
        while True:
            code = self.process.poll()
            if code is not None:
                raise P4SwitchError(
                    f"switch {self.name}: {self.target_kind} target exited with status {code} before its "
                    f"gRPC port {self.grpc_port} came up; log {self.log_file}:\n{self.log_tail()}"
                )
            if port_accepts(self.grpc_port):
                debug(f"{self.name}: gRPC port {self.grpc_port} is up\n")
                return
            if time.monotonic() > deadline:
                raise P4SwitchError(
                    f"switch {self.name}: gRPC port {ap.GRPC_HOST}:{self.grpc_port} not accepting "
                    f"connections after {timeout:g} s (pid {self.process.pid} still running); "
                    f"log {self.log_file}:\n{self.log_tail()}"
                )
            time.sleep(0.1)

    @classmethod
    def batchStartup(cls, switches: Sequence["P4Switch"], run: object = None) -> list["P4Switch"]:
        """Called by Mininet.start() after start(): wait for every target to be ready."""
        errors = []
        for sw in switches:
            try:
                sw.wait_ready()
            except P4SwitchError as err:
                errors.append(str(err))
        if errors:
            raise P4SwitchError("\n".join(errors))
        return list(switches)

    def connected(self) -> bool:
        return self.process is not None and self.process.poll() is None and port_accepts(self.grpc_port)

    def terminate_target(self) -> None:
        """SIGTERM the target, SIGKILL it after ``stop_timeout`` s; forget it."""
        if self.process is not None:
            stop_processes(terminate=[self.process.pid], timeout=self.stop_timeout)
            try:    # reap it; a busy target (BMv2 under load) can take a moment after SIGKILL
                self.process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                pass
        self.forget_target()

    def forget_target(self) -> None:
        """Reap the (stopped) target process, close its console file, delete its pid file."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            warn(f"{self.name}: target process {proc.pid} did not exit\n")
        if self._console is not None:
            self._console.close()  # type: ignore[attr-defined]
            self._console = None
        self.pid_file.unlink(missing_ok=True)
        if self.target_kind == "bmv2" and (proc is None or proc.poll() is not None):
            try:
                control_ports.reopen([self.thrift_port])
            except control_ports.ControlPortError as err:
                warn(f"{self.name}: {err}\n")

    @classmethod
    def batchShutdown(cls, switches: Sequence["P4Switch"], run: object = None) -> list["P4Switch"]:
        """Called by Mininet.stop(): SIGTERM every target at once and wait for all of them with
        one deadline, then delete each switch's interfaces."""
        running = [sw.process.pid for sw in switches if sw.process is not None]
        timeout = max((sw.stop_timeout for sw in switches), default=5.0)
        stop_processes(terminate=running, timeout=timeout)
        for sw in switches:
            sw.stop()
        return list(switches)

    def stop(self, deleteIntfs: bool = True) -> None:
        self.terminate_target()
        super().stop(deleteIntfs)


def prepare_switch_interface(intf: str) -> None:
    """Raw frames for the target: offloads off, no IPv6 chatter from the root namespace."""
    subprocess.run(
        ["ethtool", "-K", intf, "tx", "off", "rx", "off", "gso", "off", "tso", "off", "gro", "off"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    _sysctl(f"net/ipv6/conf/{intf}/disable_ipv6", "1")


def _sysctl(key: str, value: str) -> None:
    try:
        Path("/proc/sys", key).write_text(value)
    except OSError:
        pass


def stop_process(pid: int, timeout: float = 5.0, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM ``pid`` (its process group when it leads one), SIGKILL after ``timeout`` s; reap
    ``proc`` when given (our child)."""
    if stop_processes(terminate=[pid], timeout=timeout):
        warn(f"process {pid} did not exit after SIGKILL\n")
    if proc is not None:
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass


# --- cleanup --------------------------------------------------------------------------------

# Node names of aifabric's topologies (see topologies.addressing and topologies.ai_fabrics: rail
# r{g}, s{s}g{g}; dual-plane p{p}l{i}, p{p}s{j}, t{i}h{h}; dragonfly g{x}r{r}, g{x}r{r}h{h}).
SWITCH_NAME = rf"(?:p\d+[ea]\d+|c\d+|l\d+|s\d+|r\d+|p\d+[ls]\d+|g\d+r\d+|{ap.TELEMETRY_BRIDGE})"
HOST_NAME = r"(?:p\d+e\d+h\d+|l\d+h\d+|s\d+g\d+|t\d+h\d+|g\d+r\d+h\d+)"
_FABRIC_INTF = re.compile(rf"^{SWITCH_NAME}-eth\d+$|^{HOST_NAME}-eth\d+$")


# Ports a leftover target would still listen on: P4Runtime (the range bootstrap reserves) and
# run-time control.
FABRIC_PORTS = range(ap.GRPC_PORT_BASE, ap.GRPC_PORT_BASE + 1000)
RUNTIME_PORTS = range(THRIFT_PORT_BASE, THRIFT_PORT_BASE + 1000)


@dataclass
class Leftovers:
    """What aifabric left on the machine (nothing when every list is empty)."""

    processes: list[str] = field(default_factory=list)    # "pid argv..."
    namespaces: list[str] = field(default_factory=list)   # "netns INODE (node, ...)"
    interfaces: list[str] = field(default_factory=list)   # root-namespace interfaces
    ports: list[int] = field(default_factory=list)        # listening TCP ports
    closed_ports: list[int] = field(default_factory=list)  # control-port rules with no listener left

    def __bool__(self) -> bool:
        return bool(self.processes or self.namespaces or self.interfaces or self.ports or self.closed_ports)

    def describe(self) -> str:
        """One line naming what is left, or "nothing"."""
        parts = []
        for label, items in (("processes", self.processes), ("network namespaces", self.namespaces),
                             ("interfaces", self.interfaces), ("listening ports", [str(p) for p in self.ports]),
                             (f"ports closed by nft table inet {control_ports.TABLE}",
                              [str(p) for p in self.closed_ports])):
            if items:
                more = f", ... ({len(items) - 6} more)" if len(items) > 6 else ""
                parts.append(f"{len(items)} {label} ({', '.join(items[:6])}{more})")
        return "; ".join(parts) or "nothing"


@dataclass
class CleanupReport:
    killed: list[str] = field(default_factory=list)
    links_deleted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    remaining: Leftovers = field(default_factory=Leftovers)   # what the last check still found


def _is_aifabric_target(argv: Sequence[str], run_dir: Path) -> bool:
    """A target process whose log file lies under ``run_dir`` (how aifabric starts them)."""
    if not _is_target(argv) or "--device-id" not in argv:
        return False
    for i, arg in enumerate(argv[:-1]):
        if arg == "--log-file" and Path(argv[i + 1]).is_relative_to(run_dir):
            return True
    return False


def _is_target(argv: Sequence[str]) -> bool:
    return any(Path(a).name in (BMV2, SOFTSWITCH) for a in argv[:3])


def _is_fabric_host_shell(argv: Sequence[str]) -> bool:
    """A Mininet node shell (``bash ... mininet:<name>``) of an aifabric node."""
    return re.fullmatch(f"{SWITCH_NAME}|{HOST_NAME}", _node_of_shell(argv)) is not None


def _node_of_shell(argv: Sequence[str]) -> str:
    return next((a[len("mininet:") :] for a in argv if a.startswith("mininet:")), "")


def _node_of_intf(name: str) -> str | None:
    """The node an aifabric-named interface belongs to (``tnet`` for the bridge itself)."""
    if name == ap.TELEMETRY_BRIDGE:
        return name
    return name.rsplit("-eth", 1)[0] if _FABRIC_INTF.match(name) else None


def _target_node(p: Proc, recorded: dict[int, str]) -> str:
    """The switch a target process runs: its marker, its pid file, or its log file's name."""
    if p.node:
        return p.node
    if p.pid in recorded:
        return recorded[p.pid]
    log = next((p.argv[i + 1] for i, a in enumerate(p.argv[:-1]) if a == "--log-file"), "")
    return Path(log).name.split(".")[0]


def _pid_file_targets(run_dir: Path) -> dict[int, str]:
    """Live target processes recorded in ``<run_dir>/pids``."""
    found = {}
    pid_dir = run_dir / "pids"
    for pid_file in sorted(pid_dir.glob("*.pid")) if pid_dir.is_dir() else []:
        try:
            pid = int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        found[pid] = pid_file.stem
    return found


@dataclass
class _Survey:
    """One look at the machine: aifabric's processes (targets to SIGTERM, the rest to SIGKILL),
    the fabric hosts' network namespaces and the root-namespace interfaces."""

    targets: dict[int, str] = field(default_factory=dict)
    others: dict[int, str] = field(default_factory=dict)
    namespaces: dict[int, set[str]] = field(default_factory=dict)   # netns inode -> its nodes
    interfaces: list[str] = field(default_factory=list)


def _survey(run_dir: Path, wanted: Callable[[str], bool]) -> _Survey:
    procs = snapshot()
    by_pid = {p.pid: p for p in procs}
    spared, pid = set(), os.getppid()
    while pid > 1 and pid not in spared:     # never this process's own ancestors
        spared.add(pid)
        pid = by_pid[pid].ppid if pid in by_pid else 0
    recorded = _pid_file_targets(run_dir)
    root, lab = own_netns(), str(run_dir)
    survey = _Survey()

    def ours(p: Proc) -> str | None:
        """The node ``p`` belongs to when it is aifabric's and wanted (else None)."""
        if p.lab == lab and p.node is not None and wanted(p.node):
            return p.node
        node = _node_of_shell(p.argv)
        return node if _is_fabric_host_shell(p.argv) and wanted(node) else None

    checked: set[int] = set()
    for p in procs:
        if p.pid in spared:
            continue
        if _is_target(p.argv) and (p.pid in recorded or p.lab == lab or _is_aifabric_target(p.argv, run_dir)):
            if wanted(_target_node(p, recorded)):
                survey.targets[p.pid] = p.describe()
            continue
        node = ours(p)
        if node is not None:
            survey.others[p.pid] = p.describe()
            if p.netns and p.netns != root:
                survey.namespaces.setdefault(p.netns, set()).add(node)
        elif p.netns and p.netns != root and p.netns not in survey.namespaces and p.netns not in checked:
            checked.add(p.netns)   # a namespace of ours may hold only strays: know it by its interfaces
            nodes = {n for n in map(_node_of_intf, interfaces_in_netns_of(p.pid)) if n and wanted(n)}
            if nodes:
                survey.namespaces[p.netns] = nodes
    for p in procs:        # everything inside a fabric host's namespace goes with it
        if p.netns in survey.namespaces and p.pid not in survey.targets and p.pid not in spared:
            survey.others.setdefault(p.pid, p.describe())
    survey.interfaces = [n for n in _root_links() if (node := _node_of_intf(n)) is not None and wanted(node)]
    return survey


def _root_links() -> list[str]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return [link.get("ifname") for link in ipr.get_links()]


def _delete_links(names: Iterable[str], report: CleanupReport) -> None:
    """Delete root-namespace interfaces in one netlink session (a veth's peer goes with it)."""
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError

    with IPRoute() as ipr:
        for name in names:
            index = ipr.link_lookup(ifname=name)
            if not index:
                continue      # gone already, with its peer or its namespace
            try:
                ipr.link("del", index=index[0])
                report.links_deleted.append(name)
            except NetlinkError as err:
                if err.code != errno.ENODEV:
                    report.errors.append(f"deleting interface {name}: {err}")


def leftovers(run_dir: Path | None = None, *, nodes: Iterable[str] | None = None,
              ports: Iterable[int] | None = None) -> Leftovers:
    """What of aifabric's is on the machine now, touching nothing: target processes and every
    other process of its nodes, network namespaces of fabric hosts, root-namespace interfaces
    with aifabric names, listening TCP ports among ``ports`` (default: the P4Runtime and
    run-time control ranges; none when ``nodes`` narrows the check), and ports that
    `topologies.control_ports` still closes with nothing listening there (of ``ports`` when
    ``nodes`` narrows the check, else any)."""
    run_dir = (run_dir or RUN_DIR).resolve()
    only = set(nodes) if nodes is not None else None
    survey = _survey(run_dir, lambda n: only is None or n in only)
    if ports is None:
        ports = [] if only is not None else [*FABRIC_PORTS, *RUNTIME_PORTS]
    ports = set(ports)
    return Leftovers(
        processes=[*survey.targets.values(), *survey.others.values()],
        namespaces=[f"netns {ino} ({', '.join(sorted(n))})" for ino, n in survey.namespaces.items()],
        interfaces=survey.interfaces,
        ports=listening_tcp_ports(ports),
        closed_ports=control_ports.stale(None if only is None else ports),
    )


def cleanup(run_dir: Path | None = None, *, nodes: Iterable[str] | None = None, timeout: float = 5.0,
            passes: int = 3, ports: Iterable[int] | None = None) -> CleanupReport:
    """Remove what aifabric left behind: target processes (pid files under ``<run_dir>/pids``,
    marked with ``run_dir``, or logging under it) get SIGTERM; shells of aifabric-named Mininet
    nodes, every other process marked with ``run_dir`` and every process in a fabric host's
    network namespace get SIGKILL (an interactive shell ignores SIGTERM), all at once with one
    deadline of ``timeout`` s; then root-namespace interfaces named like aifabric links
    (``p0e0-eth1``, ``c3-eth2``, ..., the bridge ``tnet``) are deleted. Repeats (at most
    ``passes`` times) until nothing is found; ``remaining`` says what the last check found.
    With ``nodes``, only processes (targets included), namespaces and interfaces of those node
    names are touched; ``ports`` go to the final `leftovers` check. Ports closed to other
    machines for a BMv2 target (`topologies.control_ports`) on which nothing listens any more
    are reopened: all of them, or with ``nodes`` those among ``ports``. OVS is never called."""
    run_dir = (run_dir or RUN_DIR).resolve()
    only = set(nodes) if nodes is not None else None
    ports = set(ports) if ports is not None else None

    def wanted(node: str) -> bool:
        return only is None or node in only

    report = CleanupReport()
    for _ in range(max(1, passes)):
        survey = _survey(run_dir, wanted)
        if not (survey.targets or survey.others or survey.interfaces):
            break
        survivors = stop_processes(terminate=survey.targets, kill=survey.others, timeout=timeout)
        report.killed += [what for pid, what in {**survey.targets, **survey.others}.items() if pid not in survivors]
        report.errors += [f"process {pid} survived SIGKILL" for pid in survivors]
        _delete_links(survey.interfaces, report)
    pid_dir = run_dir / "pids"
    for pid_file in pid_dir.glob("*.pid") if pid_dir.is_dir() else []:
        if wanted(pid_file.stem):
            pid_file.unlink(missing_ok=True)
    if only is None or ports is not None:   # BMv2 Thrift ports closed by a target that is gone
        try:
            control_ports.prune(None if only is None else (ports or set()))
        except control_ports.ControlPortError as err:
            report.errors.append(str(err))
    report.remaining = leftovers(run_dir, nodes=only, ports=ports)
    return report


def mininet_cleanup() -> None:
    """Mininet's own ``mn -c`` (mininet.clean.cleanup) with its OVS commands skipped when no OVS
    database is running (they would fail or wait for ovsdb otherwise)."""
    import mininet.clean as clean

    ovs_running = Path("/var/run/openvswitch/db.sock").exists()
    original = clean.sh

    def sh(cmd: str) -> str:
        if cmd.lstrip().startswith("ovs-") and not ovs_running:
            return ""
        return original(cmd)

    clean.sh = sh
    try:
        clean.cleanup()
    finally:
        clean.sh = original


__all__ = [
    "P4Switch",
    "P4SwitchError",
    "CleanupReport",
    "Leftovers",
    "MarkedNode",
    "cleanup",
    "leftovers",
    "mininet_cleanup",
    "resolve_target",
    "target_command",
    "port_accepts",
    "RUN_DIR",
]
