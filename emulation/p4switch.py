"""A Mininet switch node that runs a P4Runtime target: BMv2 ``simple_switch_grpc`` or ``softswitch``.

Modelled on Mininet's own switch classes: ``start()`` launches the target process for the
switch's ports and returns, ``batchStartup()`` (called by ``Mininet.start()``) waits until every
target's gRPC port accepts a TCP connection, ``connected()`` is the readiness check, ``stop()``
terminates the process (SIGTERM, then SIGKILL) and deletes the switch's interfaces. Switch nodes
live in the root namespace; link interfaces are ``<switch>-eth<port>`` and the Mininet port number
is the P4 port number given to the target with ``-i PORT@IFACE``. With
``heartbeat_generator=True`` the switch has one more port, 254, on ``<switch>-eth254``: the
link-heartbeat generator's (`emulation.failover_heartbeat_generator`), created at the first start.

Command lines (``--target auto`` picks ``simple_switch_grpc`` when it is on PATH, else
``softswitch``)::

    simple_switch_grpc --device-id N -i 1@p0e0-eth1 ... --no-p4 --thrift-port T \
        --log-file <log_dir>/<name> --log-level info -- --grpc-server-addr 127.0.0.1:PORT --cpu-port 255 \
        --priority-queues 8
    softswitch --device-id N -i 1@p0e0-eth1 ... --no-p4 \
        --grpc-server-addr 127.0.0.1:PORT --cpu-port 255 --priority-queues 8 --log-file <log_dir>/<name>.log \
        --runtime-addr 127.0.0.1:T

With ``group=`` (`emulation.switch_group`, softswitch only) the switch is one of several that a
single ``softswitch group`` process serves: ``start()`` prepares its interfaces and hands its
command line to the group, whose last member's start launches the process; its log and console
are the group's, and it cannot be restarted or stopped alone.

T, the run-time control port (BMv2's Thrift server, softswitch's ``--runtime-addr``), is
16000 + device id for both, so ``set_queue_rate()``/``set_queue_depth()`` reach either target
(``simple_switch_CLI --thrift-port T``, run with this project's Python by `emulation.bmv2_cli`
whatever ``python3`` comes first on PATH / ``softswitch-ctl --addr 127.0.0.1:T``), and
``set_queue_bitrate()`` reaches softswitch (BMv2 limits queues in packets per second alone).

No control port is open to other machines. The P4Runtime servers of both targets and
softswitch's run-time control server listen on 127.0.0.1. BMv2's Thrift server listens on every
address and has no option to do otherwise, so `start()` first closes T to every interface but
loopback with the lab's nftables table (`emulation.control_ports`), and the port is reopened
when the target has stopped; `emulation.cleanup` reopens ports nothing listens on any more.

BMv2 writes its log to ``<log_dir>/<name>.txt``, at ``info`` (start-up, tables, errors): at
``trace`` it writes lines for every packet at every table, which costs more than the packet itself
(a fabric switch forwards several times fewer packets); ``AIFABRIC_BMV2_LOG_LEVEL=trace`` turns
the per-packet trace back on (flushed line by line) for debugging a P4 program. A target's stdout/stderr goes to
``<log_dir>/<name>.console``. Each started process is recorded in ``<run_dir>/pids/<name>.pid`` and carries the lab's markers in
its environment (`emulation.procs`): the targets, and through `MarkedNode` the node shells and
whatever runs in them. `emulation.cleanup` finds what a lab left by them and removes it.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable, Sequence

from mininet.log import debug, info, warn
from mininet.node import Switch

from topologies import addressing as ap
from emulation import control_ports
from emulation import failover_heartbeat_generator as hbgen
from emulation.bmv2_cli import BMV2_CLI, Bmv2CliError, run_cli
from emulation.bmv2_queues import is_queue_command, set_queue
from emulation.procs import marked_env, stop_processes
from emulation.switch_group import SwitchGroup

RUN_DIR = Path(os.environ.get("AIFABRIC_RUN_DIR", "/tmp/aifabric"))
BMV2 = "simple_switch_grpc"
SOFTSWITCH = "softswitch"
TARGETS = ("auto", "bmv2", "softswitch")
# BMv2's Thrift server: 16000 + device id. Its default (9090) would clash between switches, and
# the base keeps every valid id (<= 15535) below Linux's ephemeral port range (32768-60999), so an
# outgoing connection cannot be holding the port when BMv2 binds it.
THRIFT_PORT_BASE = 16000


def bmv2_notifications_addr(thrift_port: int) -> str:
    """Where BMv2 publishes its notifications (nanomsg). Its default is per device id
    (ipc:///tmp/bmv2-<id>-notifications.ipc), so two BMv2s of one id, in labs or tests side by
    side, refuse to start; a switch's Thrift port is its own while it runs."""
    return f"ipc:///tmp/bmv2-thrift{thrift_port}-notifications.ipc"


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
        thrift_port = thrift_port or THRIFT_PORT_BASE + device_id
        cmd += ["--thrift-port", str(thrift_port), "--notifications-addr", bmv2_notifications_addr(thrift_port)]
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
    lab markers of `emulation.procs`, so `emulation.cleanup` finds all of them."""

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
        group: "SwitchGroup | None" = None,
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
        self._process: subprocess.Popen | None = None
        self._console: object | None = None
        # served with other switches by one process (softswitch only: `emulation.switch_group`)
        self.group = group
        if group is not None:
            if self.target_kind != "softswitch":
                raise P4SwitchError(f"switch {name}: only softswitch serves several switches in one "
                                    f"process, not {self.target_kind}")
            group.join(self)
        # queue settings applied so far, in order: a restarted target gets them again (`restart_target`)
        self.queue_settings: list[str] = []
        params.setdefault("dpid", f"{self.device_id:x}")
        Switch.__init__(self, name, **params)

    @property
    def process(self) -> subprocess.Popen | None:
        """The target process serving this switch (its group's, in a group)."""
        return self.group.process if self.group is not None else self._process

    @property
    def process_name(self) -> str:
        """What the target process is called: the switch's name, or its group's."""
        return self.group.name if self.group is not None else self.name

    # --- files -----------------------------------------------------------------------------

    @property
    def log_file(self) -> Path:
        """The target's own log file (BMv2 appends ``.txt`` to the ``--log-file`` it is given)."""
        if self.group is not None:
            return self.group.log_file
        return self.log_dir / (f"{self.name}.txt" if self.target_kind == "bmv2" else f"{self.name}.log")

    @property
    def console_file(self) -> Path:
        """stdout/stderr of the target process."""
        return self.group.console_file if self.group is not None else self.log_dir / f"{self.name}.console"

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
                if is_queue_command(command):      # one Thrift call, not a CLI that parses the program
                    return set_queue(self.thrift_port, command)
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

    def set_queue_bitrate(self, bits_per_s: int, port: int | None = None) -> None:
        """Egress queue rate in bits per second, as a link's (0: unlimited; softswitch/queues.py)
        of ``port`` (all ports: None); it replaces a packet rate. softswitch only: P4SwitchError
        on BMv2, whose queues are limited in packets per second alone."""
        if self.target_kind == "bmv2":
            raise P4SwitchError(f"switch {self.name}: BMv2 limits queues only in packets/s (set_queue_rate), "
                                f"not in bits/s ({bits_per_s} asked)")
        self._queue_setting(f"set_queue_bitrate {bits_per_s}" + (f" {port}" if port is not None else ""))

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
        if self.group is not None:
            raise P4SwitchError(f"switch {self.name}: served by {self.group.name} with {len(self.group.members) - 1} "
                                f"other switches, it cannot be restarted alone")
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
        if self.group is not None:
            self.group.member_started(self)
            return
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
        self._process = subprocess.Popen(
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
        """SIGTERM the target, SIGKILL it after ``stop_timeout`` s; forget it (a group: all its switches)."""
        if self.group is not None:
            self.group.terminate(self.stop_timeout)
            return
        if self.process is not None:
            stop_processes(terminate=[self.process.pid], timeout=self.stop_timeout)
            try:    # reap it; a busy target (BMv2 under load) can take a moment after SIGKILL
                self.process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                pass
        self.forget_target()

    def forget_target(self) -> None:
        """Reap the (stopped) target process, close its console file, delete its pid file."""
        if self.group is not None:
            self.group.forget()
            return
        proc, self._process = self._process, None
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
        running = sorted({sw.process.pid for sw in switches if sw.process is not None})
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


__all__ = [
    "P4Switch",
    "P4SwitchError",
    "MarkedNode",
    "resolve_target",
    "target_command",
    "port_accepts",
    "RUN_DIR",
]
