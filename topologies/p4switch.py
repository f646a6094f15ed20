"""A Mininet switch node that runs a P4Runtime target: BMv2 ``simple_switch_grpc`` or ``softswitch``.

Modelled on Mininet's own switch classes: ``start()`` launches the target process for the
switch's ports and returns, ``batchStartup()`` (called by ``Mininet.start()``) waits until every
target's gRPC port accepts a TCP connection, ``connected()`` is the readiness check, ``stop()``
terminates the process (SIGTERM, then SIGKILL) and deletes the switch's interfaces. Switch nodes
live in the root namespace; link interfaces are ``<switch>-eth<port>`` and the Mininet port number
is the P4 port number given to the target with ``-i PORT@IFACE``.

Command lines (``--target auto`` picks ``simple_switch_grpc`` when it is on PATH, else
``softswitch``)::

    simple_switch_grpc --device-id N -i 1@p0e0-eth1 ... --no-p4 --thrift-port T \
        --log-file <log_dir>/<name> --log-flush -- --grpc-server-addr 127.0.0.1:PORT --cpu-port 255
    softswitch --device-id N -i 1@p0e0-eth1 ... --no-p4 \
        --grpc-server-addr 127.0.0.1:PORT --cpu-port 255 --log-file <log_dir>/<name>.log \
        --runtime-addr 127.0.0.1:T

T, the run-time control port (BMv2's Thrift server, softswitch's ``--runtime-addr``), is
16000 + device id for both, so ``set_queue_rate()``/``set_queue_depth()`` reach either target
(``simple_switch_CLI --thrift-port T`` / ``softswitch-ctl --addr 127.0.0.1:T``).

BMv2 writes its log to ``<log_dir>/<name>.txt``; a target's stdout/stderr goes to
``<log_dir>/<name>.console``. Each started process is recorded in ``<run_dir>/pids/<name>.pid``; `cleanup()` kills what aifabric
started (by pid file, and by scanning for target processes whose log file is under the run
directory) and deletes leftover fabric interfaces and Mininet host shells, without touching OVS.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from mininet.log import debug, info, warn
from mininet.node import Switch

from topologies import addressing as ap

RUN_DIR = Path(os.environ.get("AIFABRIC_RUN_DIR", "/tmp/aifabric"))
BMV2 = "simple_switch_grpc"
BMV2_CLI = "simple_switch_CLI"
SOFTSWITCH = "softswitch"
TARGETS = ("auto", "bmv2", "softswitch")
# BMv2's Thrift server: 16000 + device id. Its default (9090) would clash between switches, and
# the base keeps every valid id (<= 15535) below Linux's ephemeral port range (32768-60999), so an
# outgoing connection cannot be holding the port when BMv2 binds it.
THRIFT_PORT_BASE = 16000


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
) -> list[str]:
    """The command line that starts switch ``name`` (see the module docstring); BMv2's Thrift
    port defaults to THRIFT_PORT_BASE + device id; softswitch gets ``--runtime-addr`` only when
    ``runtime_port`` is given."""
    cmd = [executable, "--device-id", str(device_id)]
    for port, intf in ports:
        cmd += ["-i", f"{port}@{intf}"]
    cmd.append("--no-p4")
    grpc_addr = f"{ap.GRPC_HOST}:{grpc_port}"
    if kind == "bmv2":
        cmd += ["--thrift-port", str(thrift_port or THRIFT_PORT_BASE + device_id)]
        cmd += ["--log-file", str(log_dir / name), "--log-flush", *extra_args]
        cmd += ["--", "--grpc-server-addr", grpc_addr, "--cpu-port", str(cpu_port)]
    else:
        cmd += ["--grpc-server-addr", grpc_addr, "--cpu-port", str(cpu_port)]
        cmd += ["--log-file", str(log_dir / f"{name}.log")]
        if runtime_port is not None:
            cmd += ["--runtime-addr", f"{ap.GRPC_HOST}:{runtime_port}"]
        cmd += list(extra_args)
    return cmd


def port_accepts(port: int, host: str = ap.GRPC_HOST, timeout: float = 0.2) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path} not readable)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


class P4Switch(Switch):
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
        self.thrift_port = thrift_port or THRIFT_PORT_BASE + self.device_id
        self.process: subprocess.Popen | None = None
        self._console: object | None = None
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

    def command(self) -> list[str]:
        return target_command(
            self.target_kind,
            self.executable,
            name=self.name,
            device_id=self.device_id,
            ports=self.data_ports(),
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
            result = subprocess.run(
                [BMV2_CLI, "--thrift-port", str(self.thrift_port)],
                input=command + "\n", capture_output=True, text=True, timeout=30, check=False,
            )
            answer = (result.stdout + result.stderr).strip()
            if result.returncode != 0 or "Error" in answer or "Invalid" in answer:
                raise P4SwitchError(f"switch {self.name}: {BMV2_CLI} {command!r} failed: {answer[-500:]}")
            return answer
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
        self.runtime_command(f"set_queue_rate {rate_pps}" + (f" {port}" if port is not None else ""))

    def set_queue_depth(self, depth_pkts: int, port: int | None = None) -> None:
        """Egress queue depth in packets of ``port`` (all ports: None)."""
        self.runtime_command(f"set_queue_depth {depth_pkts}" + (f" {port}" if port is not None else ""))

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
        for _, intf in self.data_ports():
            prepare_switch_interface(intf)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        cmd = self.command()
        info(f"{self.name}: {' '.join(cmd)}\n")
        console = open(self.console_file, "wb")
        self._console = console
        self.process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, start_new_session=True
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
        proc = self.process
        if proc is not None:
            stop_process(proc.pid, self.stop_timeout, proc)
        self.process = None
        if self._console is not None:
            self._console.close()  # type: ignore[attr-defined]
            self._console = None
        try:
            self.pid_file.unlink()
        except FileNotFoundError:
            pass

    @classmethod
    def batchShutdown(cls, switches: Sequence["P4Switch"], run: object = None) -> list["P4Switch"]:
        """Called by Mininet.stop(): SIGTERM every target first, then reap each and delete its
        interfaces (faster than one at a time)."""
        for sw in switches:
            if sw.process is not None and sw.process.poll() is None:
                try:
                    os.kill(sw.process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
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
    """SIGTERM ``pid`` (and its process group), SIGKILL after ``timeout`` s, reap if our child."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + (timeout if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline:
            if proc is not None:
                if proc.poll() is not None:
                    return
            elif not _alive(pid):
                return
            time.sleep(0.05)
    if proc is not None:
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            warn(f"process {pid} did not exit after SIGKILL\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purposes
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return False


# --- cleanup --------------------------------------------------------------------------------

# Node names of aifabric's topologies (see topologies.addressing).
SWITCH_NAME = rf"(?:p\d+[ea]\d+|c\d+|l\d+|s\d+|{ap.TELEMETRY_BRIDGE})"
HOST_NAME = r"(?:p\d+e\d+h\d+|l\d+h\d+)"
_FABRIC_INTF = re.compile(rf"^{SWITCH_NAME}-eth\d+$|^{HOST_NAME}-eth\d+$")


@dataclass
class CleanupReport:
    killed: list[str] = field(default_factory=list)
    links_deleted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _is_aifabric_target(argv: list[str], run_dir: Path) -> bool:
    """A target process whose log file lies under ``run_dir`` (how aifabric starts them)."""
    if not any(Path(a).name in (BMV2, SOFTSWITCH) for a in argv[:3]) or "--device-id" not in argv:
        return False
    for i, arg in enumerate(argv[:-1]):
        if arg == "--log-file" and Path(argv[i + 1]).is_relative_to(run_dir):
            return True
    return False


def _is_fabric_host_shell(argv: list[str]) -> bool:
    """A Mininet node shell (``bash ... mininet:<name>``) of an aifabric node."""
    for arg in argv:
        if arg.startswith("mininet:"):
            return re.fullmatch(f"{SWITCH_NAME}|{HOST_NAME}", arg[len("mininet:") :]) is not None
    return False


def _node_of_shell(argv: list[str]) -> str:
    return next((a[len("mininet:") :] for a in argv if a.startswith("mininet:")), "")


def cleanup(run_dir: Path | None = None, *, nodes: Iterable[str] | None = None, timeout: float = 5.0) -> CleanupReport:
    """Remove what aifabric left behind: target processes (pid files under ``<run_dir>/pids``
    and any target whose log file is under ``run_dir``), shells of aifabric-named Mininet nodes
    (their network namespaces go with them) and root-namespace interfaces named like aifabric
    links (``p0e0-eth1``, ``c3-eth2``, ...). With ``nodes``, only shells and interfaces of those
    node names are touched (processes are still chosen by ``run_dir``). OVS is never called."""
    run_dir = (run_dir or RUN_DIR).resolve()
    only = set(nodes) if nodes is not None else None

    def wanted(node: str) -> bool:
        return only is None or node in only

    report = CleanupReport()
    victims: dict[int, str] = {}
    pid_dir = run_dir / "pids"
    for pid_file in sorted(pid_dir.glob("*.pid")) if pid_dir.is_dir() else []:
        try:
            pid = int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pid = 0
        argv = _cmdline(pid) if pid else []
        if argv and any(Path(a).name in (BMV2, SOFTSWITCH) for a in argv[:3]):
            victims[pid] = f"{pid_file.stem}: {' '.join(argv[:3])}"
        pid_file.unlink(missing_ok=True)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        argv = _cmdline(int(entry.name))
        if _is_aifabric_target(argv, run_dir):
            victims.setdefault(int(entry.name), " ".join(argv[:4]))
        elif _is_fabric_host_shell(argv) and wanted(_node_of_shell(argv)):
            victims.setdefault(int(entry.name), " ".join(argv[-1:]))
    for pid, what in victims.items():
        stop_process(pid, timeout)
        report.killed.append(f"{pid} {what}")
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False).stdout
    for line in links.splitlines():
        try:
            name = line.split(":", 2)[1].strip().split("@", 1)[0]
        except IndexError:
            continue
        if _FABRIC_INTF.match(name) and wanted(name.rsplit("-eth", 1)[0]):
            res = subprocess.run(["ip", "link", "del", name], capture_output=True, text=True, check=False)
            if res.returncode == 0:
                report.links_deleted.append(name)
            elif "Cannot find device" not in res.stderr:
                report.errors.append(f"ip link del {name}: {res.stderr.strip()}")
    if wanted(ap.TELEMETRY_BRIDGE):
        from topologies.telemetry_net import delete_bridge

        if delete_bridge(ap.TELEMETRY_BRIDGE):
            report.links_deleted.append(ap.TELEMETRY_BRIDGE)
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
    "cleanup",
    "mininet_cleanup",
    "resolve_target",
    "target_command",
    "port_accepts",
    "RUN_DIR",
]
