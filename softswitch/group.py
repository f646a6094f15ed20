"""``softswitch group FILE``: many devices served by one process.

Each line of FILE is one device's softswitch command line, as ``softswitch`` takes it (its own
ports, device id, P4Runtime address, run-time control address, queues; blank lines and ``#``
comments are skipped). The devices share the interpreter, the libraries and a program's native
library, so a device costs what its own state costs (its program's Python objects, its tables,
its servers: about 12 MiB for the fabric program) instead of a process of its own (about 49
MiB): what lets a k=16 fat-tree's 320 switches come up in 6 GiB (benchmarks/scale.py). The packets of a natively run
program never take the interpreter's lock; a program on the Python path does, so its devices
share one core.

The group logs to its own ``--log-file`` (the lines' log options are not used). SIGINT or SIGTERM
stops every device; a device that cannot start stops the others and the error names its line.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import threading

from .args import OneLineErrors
from .options import LOG_LEVELS, START_ERRORS, CliError, parse_config, setup_logging, start_error, wait_for_signal
from .switch import Switch, SwitchConfig


class _LineErrors(OneLineErrors):
    """A line's bad arguments raise (the group names the line) instead of exiting."""

    def error(self, message: str):
        raise CliError(message)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrors(prog="softswitch group",
                      description="Serve the devices of FILE (a softswitch command line each) in one process.")
    p.add_argument("file", help="one softswitch command line per device")
    p.add_argument("--log-level", "-L", choices=LOG_LEVELS, default="info")
    p.add_argument("--log-file", default=None, help="the group's log (default: standard error)")
    return p


def read_configs(path: str) -> list[SwitchConfig]:
    """The devices of ``path``; CliError naming the line of a bad one, or of two that would
    take the same device id, address or interface."""
    with open(path) as f:
        lines = [(n, line.strip()) for n, line in enumerate(f, start=1)]
    configs: list[SwitchConfig] = []
    taken: dict[tuple[str, object], int] = {}
    for number, line in lines:
        if not line or line.startswith("#"):
            continue
        try:
            cfg, _ = parse_config(shlex.split(line), _LineErrors)
        except (CliError, ValueError) as e:
            raise CliError(f"{path} line {number}: {e}") from None
        claims = [("device id", cfg.device_id), ("P4Runtime address", cfg.grpc_addr),
                  *(("interface", p.iface) for p in cfg.ports)]
        if cfg.runtime_addr:
            claims.append(("run-time control address", cfg.runtime_addr))
        for what, value in claims:
            first = taken.setdefault((what, value), number)
            if first != number:
                raise CliError(f"{path} line {number}: {what} {value} is line {first}'s already")
        configs.append(cfg)
    if not configs:
        raise CliError(f"{path}: no devices (a softswitch command line per line)")
    return configs


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    try:
        configs = read_configs(args.file)
        setup_logging(args.log_level, args.log_file)
    except START_ERRORS as e:
        print(f"softswitch group: error: {start_error(e)}", file=sys.stderr)
        return 2
    switches: list[Switch] = []
    for cfg in configs:
        switch = Switch(cfg)
        try:
            switch.start()
        except START_ERRORS as e:
            stop_all(switches)
            print(f"softswitch group: error: device {cfg.device_id}: {start_error(e)}", file=sys.stderr)
            return 2
        switches.append(switch)
    print(f"softswitch group: {len(switches)} devices ready, P4Runtime on "
          f"{', '.join(s.config.grpc_addr for s in switches)}", flush=True)
    wait_for_signal()
    stop_all(switches)
    return 0


def stop_all(switches: list[Switch]) -> None:
    """Stop every device at once: each waits up to a second for its P4Runtime calls to end,
    and one after the other a group of 32 would outlast whoever stops it (SIGKILL)."""
    threads = [threading.Thread(target=switch.stop, name=f"stop-{switch.device_id}") for switch in switches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
