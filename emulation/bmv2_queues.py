"""BMv2's egress queue depth and rate, set through simple_switch's own Thrift service from this
process instead of through ``simple_switch_CLI``.

The CLI first fetches and parses the switch's whole JSON program (3 MB for fabric.p4: about a
second of CPU per call, so 20 switches of a fabric took seconds on a busy 2-core machine), which
a queue setting never needs. Here a setting is one Thrift call on a connection of its own. BMv2's
Thrift bindings (package ``sswitch_runtime``) are loaded from where the CLI finds them
(`emulation.bmv2_cli.find_cli`) without adding that directory to ``sys.path``: it also holds
packages named ``p4`` and ``google`` that would shadow the project's own.

    set_queue(thrift_port, "set_queue_depth 1024")       # every port
    set_queue(thrift_port, "set_queue_rate 50 3")        # port 3

Any other command is the CLI's (`emulation.bmv2_cli.run_cli`); a failure is a `Bmv2CliError` in
one line, as there.
"""
from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import threading
from pathlib import Path
from types import ModuleType

from emulation.bmv2_cli import THRIFT_HOST, Bmv2CliError, find_cli

PACKAGE = "sswitch_runtime"
SERVICE = "simple_switch"        # the name simple_switch multiplexes this service under
QUEUE_COMMAND = re.compile(r"^set_queue_(depth|rate) (\d+)(?: (\d+))?$")
_loading = threading.Lock()      # callers may set several switches' queues from threads at once


def is_queue_command(command: str) -> bool:
    """``set_queue_depth N [PORT]`` or ``set_queue_rate N [PORT]``."""
    return QUEUE_COMMAND.match(command.strip()) is not None


def _bindings() -> ModuleType:
    """BMv2's ``sswitch_runtime.SimpleSwitch`` (loaded once)."""
    name = f"{PACKAGE}.SimpleSwitch"
    if name in sys.modules:
        return sys.modules[name]
    with _loading:
        return _load(name)


def _load(name: str) -> ModuleType:
    if PACKAGE not in sys.modules:
        cli = find_cli()
        found = [Path(d, PACKAGE) for d in [*cli.module_path, *sys.path] if Path(d, PACKAGE, "__init__.py").is_file()]
        if not found:
            raise Bmv2CliError(f"BMv2's Python package {PACKAGE} is found neither where {cli.path} looks "
                               f"({', '.join(cli.module_path) or 'nowhere'}) nor on {sys.executable}'s path")
        spec = importlib.util.spec_from_file_location(PACKAGE, found[0] / "__init__.py",
                                                      submodule_search_locations=[str(found[0])])
        package = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = package
        spec.loader.exec_module(package)
    return importlib.import_module(name)


def set_queue(thrift_port: int, command: str, timeout_s: float = 10.0) -> str:
    """Apply one queue command (`is_queue_command`) to the simple_switch whose Thrift server
    listens on ``thrift_port``; returns "" as the CLI prints nothing for it."""
    m = QUEUE_COMMAND.match(command.strip())
    if m is None:
        raise ValueError(f"not a queue command: {command!r} (set_queue_depth|set_queue_rate N [PORT])")
    what, value, port = m.group(1), int(m.group(2)), m.group(3)
    from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
    from thrift.transport import TSocket, TTransport

    bindings = _bindings()
    sock = TSocket.TSocket(THRIFT_HOST, thrift_port)
    sock.setTimeout(timeout_s * 1000)
    transport = TTransport.TBufferedTransport(sock)
    client = bindings.Client(TMultiplexedProtocol.TMultiplexedProtocol(
        TBinaryProtocol.TBinaryProtocol(transport), SERVICE))
    try:
        transport.open()
    except TTransport.TTransportException:
        raise Bmv2CliError(f"nothing answers on {THRIFT_HOST}:{thrift_port} (is the switch running?)") from None
    try:
        if what == "depth":
            client.set_all_egress_queue_depths(value) if port is None else client.set_egress_queue_depth(int(port), value)
        else:
            client.set_all_egress_queue_rates(value) if port is None else client.set_egress_queue_rate(int(port), value)
    except Exception as err:      # Thrift's own errors and the switch's (an unknown port)
        raise Bmv2CliError(f"{THRIFT_HOST}:{thrift_port}: {command!r} failed: {type(err).__name__}: {err}") from None
    finally:
        transport.close()
    return ""


__all__ = ["is_queue_command", "set_queue"]
