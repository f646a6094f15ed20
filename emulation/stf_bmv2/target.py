"""BMv2's simple_switch as an STF target, driven as p4c's BMv2 runner drives it.

simple_switch gets a port for every port the test names: veth pairs as root, else pcap
files as p4c's runner uses (ports.py). Control-plane commands go through BMv2's Thrift
CLI (simple_switch_CLI, run with this project's Python: emulation.bmv2_cli), gathered and
sent before the next packet or read.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from softswitch.stf.errors import StfError, Unsupported
from softswitch.stf.names import ResolvedEntry

from .ports import PcapPorts, VethPorts

# BMv2 priorities: the lower wins; STF's: the higher wins (p4c's runner subtracts from 10000)
BMV2_PRIORITY_BASE = 10000

SWITCH = "simple_switch"
START_TIMEOUT_S = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Bmv2Target:
    name = "bmv2"

    def __init__(self, json_path: Path, ports: set[int], senders: set[int] | None = None,
                 use_files: bool | None = None):
        """``use_files``: pcap files instead of veths (default: veths as root, else files)."""
        exe = shutil.which(SWITCH)
        if exe is None:
            raise Unsupported(f"{SWITCH} is not on PATH (BMv2 is not installed)")
        from emulation.bmv2_cli import Bmv2CliError, find_cli   # the BMv2 side only, where it runs
        from emulation.p4switch import bmv2_notifications_addr
        try:
            find_cli()
        except Bmv2CliError as e:
            raise Unsupported(str(e)) from None
        self.js = json.loads(json_path.read_text())
        self.dir = Path(tempfile.mkdtemp(prefix="stf-bmv2-"))
        self.pending: list[str] = []
        self.table_handles: dict[str, int] = {}
        self.nodes = 0
        self.thrift_port = _free_port()
        self.proc = None
        self.log = open(self.dir / "switch.log", "w")
        use_files = os.geteuid() != 0 if use_files is None else use_files
        try:
            self.io = (PcapPorts(sorted(ports), set(ports) if senders is None else senders, self.dir,
                                 START_TIMEOUT_S) if use_files else VethPorts(sorted(ports), f"stf{os.getpid() % 100000}"))
            args = [exe, "--thrift-port", str(self.thrift_port), "--device-id", "0",
                    "--notifications-addr", bmv2_notifications_addr(self.thrift_port), *self.io.switch_args()]
            self.proc = subprocess.Popen([*args, str(json_path.resolve())], cwd=self.dir, stdout=self.log,
                                         stderr=subprocess.STDOUT)
            self.io.started(self._check_alive)
            self._wait_thrift()
        except BaseException:
            self.close()
            raise

    def _wait_thrift(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            self._check_alive()
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.thrift_port)) == 0:
                    return
            time.sleep(0.05)
        raise Unsupported(f"{SWITCH}'s Thrift server did not answer within {START_TIMEOUT_S:g} s")

    def _check_alive(self) -> None:
        if self.proc.poll() is not None:
            self.log.flush()
            tail = (self.dir / "switch.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise Unsupported(f"{SWITCH} exited with status {self.proc.returncode}: {' | '.join(tail)}")

    # -- the CLI -------------------------------------------------------------------------------
    def _cli(self, *commands: str) -> None:
        self.pending += commands

    def _flush(self) -> str:
        if not self.pending:
            return ""
        from emulation.bmv2_cli import Bmv2CliError, run_cli
        commands, self.pending = self.pending, []
        try:
            return run_cli(self.thrift_port, commands)
        except Bmv2CliError as e:
            raise StfError(f"BMv2 refused a command: {e}") from None

    def _ask(self, command: str) -> str:
        self._flush()
        self._cli(command)
        return self._flush()

    # -- packets -----------------------------------------------------------------------------
    def send(self, port: int, frame: bytes) -> None:
        self._flush()
        self.io.send(port, frame)

    def settle(self) -> None:
        self.io.settle()

    def finish(self) -> dict[int, list[bytes]]:
        self._flush()
        return self.io.finish(self._stop)

    def errors(self) -> list[str]:
        return []      # BMv2 logs what it drops; the frames say the rest

    def _stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def close(self) -> None:
        self._stop()
        if hasattr(self, "io"):
            self.io.close()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- tables ------------------------------------------------------------------------------
    def add(self, e: ResolvedEntry) -> int:
        keys = []
        for k, m in zip(e.table.keys, e.match):
            mt = k.match_type
            keys.append(f"{m[0]:#x}/{m[1]}" if mt == "lpm" else f"{m[0]:#x}&&&{m[1]:#x}" if mt in ("ternary", "optional")
                        else f"{m[0]:#x}->{m[1]:#x}" if mt == "range" else f"{m:#x}")
        cmd = f"table_add {e.table.name} {e.action.name} {' '.join(keys)} => {' '.join(f'{d:#x}' for d in e.data)}"
        if e.table.needs_priority:
            cmd += f" {BMV2_PRIORITY_BASE - (e.priority or 0)}"
        self._cli(cmd)
        handle = self.table_handles.get(e.table.name, 0)   # BMv2: the lowest free handle of the table
        self.table_handles[e.table.name] = handle + 1
        return handle

    def set_default(self, table: str, action: str, data: tuple) -> None:
        self._cli(f"table_set_default {table} {action} {' '.join(f'{d:#x}' for d in data)}".rstrip())

    def clear_tables(self) -> None:
        for pipe in self.js.get("pipelines", []):
            for t in pipe.get("tables", []):
                if t.get("key") and not t.get("entries"):
                    self._cli(f"table_clear {t['name']}")
        self.table_handles.clear()

    # -- replication ------------------------------------------------------------------------
    def mirroring_add(self, session: int, port: int) -> None:
        self._cli(f"mirroring_add {session} {port}")

    def mirroring_add_mc(self, session: int, group: int) -> None:
        self._cli(f"mirroring_add_mc {session} {group}")

    def mirroring_delete(self, session: int) -> None:
        self._cli(f"mirroring_delete {session}")

    def mc_mgrp_create(self, group: int) -> None:
        self._cli(f"mc_mgrp_create {group}")

    def mc_node_create(self, rid: int, ports: list[int]) -> int:
        self._cli(f"mc_node_create {rid} {' '.join(map(str, ports))}")
        self.nodes += 1
        return self.nodes - 1

    def mc_node_update(self, handle: int, ports: list[int]) -> None:
        self._cli(f"mc_node_update {handle} {' '.join(map(str, ports))}")

    def mc_node_associate(self, group: int, handle: int) -> None:
        self._cli(f"mc_node_associate {group} {handle}")

    # -- state -------------------------------------------------------------------------------
    _COUNTER = re.compile(r"\[\d+\]=\s*\((\d+) bytes, (\d+) packets\)")
    _REGISTER = re.compile(r"\[\d+\]=\s*(\d+)")

    def counter(self, name: str, index: int) -> tuple[int, int]:
        m = self._COUNTER.search(self._ask(f"counter_read {name} {index}"))
        if m is None:
            raise StfError(f"counter_read {name} {index}: no value in BMv2's answer")
        return int(m.group(2)), int(m.group(1))

    def direct_counter(self, table: str, handle: int) -> tuple[int, int]:
        name = next((c["name"] for c in self.js.get("counter_arrays", [])
                     if c.get("is_direct") and c.get("binding") == table), None)
        if name is None:
            raise StfError(f"table '{table}' has no direct counter")
        return self.counter(name, handle)

    def counter_write(self, name: str, index: int, packets: int, nbytes: int) -> None:
        self._cli(f"counter_write {name} {index} {packets} {nbytes}")

    def register(self, name: str, index: int) -> int:
        m = self._REGISTER.search(self._ask(f"register_read {name} {index}"))
        if m is None:
            raise StfError(f"register_read {name} {index}: no value in BMv2's answer")
        return int(m.group(1))

    def register_write(self, name: str, index: int, value: int) -> None:
        self._cli(f"register_write {name} {index} {value}")

    def register_reset(self, name: str) -> None:
        self._cli(f"register_reset {name}")
