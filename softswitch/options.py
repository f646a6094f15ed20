"""What ``softswitch`` and ``softswitch group`` share: a device's command line parsed into a
SwitchConfig (CliError names what is wrong in it), logging, the errors a start may raise for a
reason its user can mend, and waiting for the signal that stops the devices."""
from __future__ import annotations

import argparse
import logging
import os
import signal

from .addr import host_port_arg
from .args import OneLineErrors
from .fastpath import MODES
from .native.mode import DEFAULT_MODE as NATIVE_DEFAULT, MODES as NATIVE_MODES, NativeUnavailable
from .native.xsk import DEFAULT_MODE as PORT_IO_DEFAULT, MODES as PORT_IO_MODES, PortIOUnavailable
from .pipeline.compiled import CompileError
from .pipeline.errors import ProgramError
from .pfc import ACTIONS, Lossless, Watchdog
from .ports import PortError, PortSpec
from .signal_stop import SignalStop
from .queues import (MAX_PRIORITY_QUEUES, check_bitrate, check_depth, check_port, check_priority_queues, check_rate,
                     check_weight)
from .switch import SwitchConfig

LOG_LEVELS = ("trace", "debug", "info", "warn", "error", "off")
MAX_DEVICE_ID = 2**64 - 1     # P4Runtime's device_id is a uint64


class CliError(Exception):
    pass


def _per_port(text: str) -> tuple[int, int | None]:
    """``VALUE`` for every port or ``VALUE@PORT`` for one."""
    value, sep, port = text.partition("@")
    try:
        return int(value), (int(port) if sep else None)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not N or N@PORT") from None


def _lossless(text: str) -> tuple[int, Lossless, int | None]:
    """``PRIO:XOFF:XON:HEADROOM[:QUANTA][@PORT]`` (bytes; quanta 1..65535)."""
    spec, sep, port = text.partition("@")
    try:
        numbers = [int(v) for v in spec.split(":")]
        if len(numbers) not in (4, 5):
            raise ValueError("four or five numbers")
        return numbers[0], Lossless(*numbers[1:]), int(port) if sep else None
    except (ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(f"'{text}' is not PRIO:XOFF:XON:HEADROOM[:QUANTA][@PORT] ({e})") from None


def _watchdog(text: str) -> Watchdog:
    """``DETECT_MS:RESTORE_MS[:POLL_MS[:drop|forward]]``."""
    parts = text.split(":")
    try:
        if not 2 <= len(parts) <= 4:
            raise ValueError("two to four fields")
        ms = [int(v) * 1000 for v in parts[:3]]
        return Watchdog(*ms, *parts[3:])
    except (ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(f"'{text}' is not DETECT_MS:RESTORE_MS[:POLL_MS[:"
                                         f"{'|'.join(ACTIONS)}]] ({e})") from None


def build_parser(parser_class: type[argparse.ArgumentParser] = OneLineErrors) -> argparse.ArgumentParser:
    p = parser_class(
        prog="softswitch",
        description="An embedded P4 target: runs p4c's BMv2 JSON (v1model), serves P4Runtime, "
                    "moves packets on Linux interfaces.")
    p.add_argument("json", nargs="?", help="BMv2 JSON of the P4 program (or use --no-p4)")
    p.add_argument("--no-p4", action="store_true", help="start without a program; push one over P4Runtime")
    p.add_argument("--device-id", type=int, default=0, help="P4Runtime device id (default 0)")
    p.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE",
                   help="attach interface IFACE as port PORT (repeatable)")
    p.add_argument("--grpc-server-addr", type=host_port_arg, default="127.0.0.1:9559",
                   help="P4Runtime server address (default 127.0.0.1:9559; never all interfaces unless asked)")
    p.add_argument("--cpu-port", type=int, default=None, help="port number of the CPU port (packet-in/out)")
    p.add_argument("--drop-port", type=int, default=511, help="egress_spec value that drops (default 511)")
    p.add_argument("--runtime-addr", type=host_port_arg, default=None,
                   help="address of the runtime control server used by softswitch-ctl (queue rate/depth)")
    p.add_argument("--queue-depth", type=_per_port, action="append", default=[], metavar="PKTS[@PORT]",
                   help="egress queue depth in packets, for all ports or one (repeatable; default 64)")
    p.add_argument("--queue-rate", type=_per_port, action="append", default=[], metavar="PPS[@PORT]",
                   help="egress queue rate in packets/s, for all ports or one (repeatable; default unlimited)")
    p.add_argument("--queue-bitrate", type=_per_port, action="append", default=[], metavar="BPS[@PORT]",
                   help="egress queue rate in bits/s, as a link's (a frame costs its bytes on the wire: padding "
                        "to 64, FCS, preamble, gap), for all ports or one; instead of --queue-rate there "
                        "(repeatable; default unlimited)")
    p.add_argument("--priority-queues", type=int, default=1, metavar="N",
                   help=f"egress queues per port, served by standard_metadata.priority, highest first "
                        f"(1..{MAX_PRIORITY_QUEUES}; default 1: a packet of priority 1 or more is dropped)")
    p.add_argument("--queue-weight", type=_per_port, action="append", default=[], metavar="W[@PORT]",
                   help="the classes' weight, for all ports or one: 0 strict priority (default), else packets a "
                        "turn of the weighted round robin (softswitch-ctl set_queue_weight: one class)")
    p.add_argument("--lossless", type=_lossless, action="append", default=[],
                   metavar="PRIO:XOFF:XON:HEADROOM[:QUANTA][@PORT]",
                   help="class PRIO lossless (802.1Qbb PFC) on every data port or one: PAUSE at XOFF bytes of its "
                        "ingress buffer, XON at XON, HEADROOM bytes more admitted, QUANTA asked (default 65535); "
                        "repeatable")
    p.add_argument("--pfc-watchdog", type=_watchdog, default=None, metavar="DETECT_MS:RESTORE_MS[:POLL_MS[:ACTION]]",
                   help="the PFC watchdog: a lossless queue paused DETECT_MS with packets waiting is in a storm, PFC off "
                        "on it (ACTION drop, the default: its packets dropped; forward: sent) until no PAUSE came "
                        "for RESTORE_MS; it looks every POLL_MS (default 10)")
    p.add_argument("--compiled", choices=MODES, default=os.environ.get("SOFTSWITCH_COMPILED", "auto"),
                   help="the compiled packet path (Cython + a C compiler): auto = when built (in the "
                        "background, cached), now = before the program runs (or fail), off = Python only "
                        "(default: $SOFTSWITCH_COMPILED, else auto)")
    p.add_argument("--native", choices=NATIVE_MODES, default=os.environ.get("SOFTSWITCH_NATIVE", NATIVE_DEFAULT),
                   help="the native data path (the program and the loop in C, gcc): auto = when the native "
                        "generator can do the program (else the Python/compiled path, the reason shown by "
                        "softswitch-ctl packet_path), on = native or fail, off = never "
                        f"(default: $SOFTSWITCH_NATIVE, else {NATIVE_DEFAULT})")
    p.add_argument("--port-io", choices=PORT_IO_MODES, default=os.environ.get("SOFTSWITCH_PORT_IO", PORT_IO_DEFAULT),
                   help="the native data path's port I/O: auto = an AF_XDP socket on each port where the "
                        "kernel gives one (an XDP program on the interface redirecting its frames; copy mode "
                        "on veths), else its AF_PACKET socket, the reason shown by softswitch-ctl packet_path; "
                        "af_xdp = AF_XDP on every port or fail; packet = AF_PACKET sockets (recvmmsg/sendmmsg) "
                        f"(default: $SOFTSWITCH_PORT_IO, else {PORT_IO_DEFAULT}; the Python path reads AF_PACKET "
                        "sockets whatever this says)")
    p.add_argument("--log-level", "-L", choices=LOG_LEVELS, default="info")
    p.add_argument("--log-file", default=None, help="log to this file instead of standard error")
    p.add_argument("--log-console", action="store_true", help="accepted for BMv2 compatibility")
    p.add_argument("--log-flush", action="store_true", help="accepted for BMv2 compatibility")
    return p


def parse_config(argv: list[str], parser_class: type[argparse.ArgumentParser] = OneLineErrors
                 ) -> tuple[SwitchConfig, argparse.Namespace]:
    args = build_parser(parser_class).parse_args([a for a in argv if a != "--"])
    if args.compiled not in MODES:     # argparse checks a given value, not the default
        raise CliError(f"SOFTSWITCH_COMPILED={args.compiled!r} is not one of {', '.join(MODES)}")
    if args.native not in NATIVE_MODES:
        raise CliError(f"SOFTSWITCH_NATIVE={args.native!r} is not one of {', '.join(NATIVE_MODES)}")
    if args.port_io not in PORT_IO_MODES:
        raise CliError(f"SOFTSWITCH_PORT_IO={args.port_io!r} is not one of {', '.join(PORT_IO_MODES)}")
    if args.port_io == "af_xdp" and args.native == "off":
        raise CliError("--port-io af_xdp needs the native data path (--native auto or on): the Python path "
                       "reads AF_PACKET sockets")
    if args.json and args.no_p4:
        raise CliError("give either a JSON program or --no-p4, not both")
    if not args.json and not args.no_p4:
        raise CliError("no program: give a BMv2 JSON file or --no-p4")
    for name, port in (("--cpu-port", args.cpu_port), ("--drop-port", args.drop_port)):
        if port is not None and not 0 < port < 512:
            raise CliError(f"{name} {port} is outside 1..511")
    if args.cpu_port is not None and args.cpu_port == args.drop_port:
        raise CliError(f"--cpu-port and --drop-port are both {args.cpu_port}")
    try:
        check_priority_queues(args.priority_queues)
    except ValueError as e:
        raise CliError(f"--priority-queues: {e}") from None
    if not 0 <= args.device_id <= MAX_DEVICE_ID:
        raise CliError(f"--device-id {args.device_id} is outside 0..{MAX_DEVICE_ID} (P4Runtime's uint64)")
    try:
        ports = [PortSpec.parse(t) for t in args.interface]
    except PortError as e:
        raise CliError(str(e)) from None
    cfg = SwitchConfig(device_id=args.device_id, ports=ports, cpu_port=args.cpu_port,
                       drop_port=args.drop_port, grpc_addr=args.grpc_server_addr,
                       runtime_addr=args.runtime_addr, json_path=args.json,
                       priority_queues=args.priority_queues, compiled=args.compiled,
                       native=args.native, port_io=args.port_io, pfc_watchdog=args.pfc_watchdog)
    known_ports = [p.number for p in ports] + ([args.cpu_port] if args.cpu_port is not None else [])
    # (flag, values, bounds check, per-port dict, default attribute)
    for flag, values, check, per_port, default in (
            ("--queue-depth", args.queue_depth, check_depth, cfg.port_queue_depths, "queue_depth"),
            ("--queue-rate", args.queue_rate, check_rate, cfg.port_queue_rates, "queue_rate"),
            ("--queue-bitrate", args.queue_bitrate, check_bitrate, cfg.port_queue_bitrates, "queue_bitrate"),
            ("--queue-weight", args.queue_weight, check_weight, cfg.port_queue_weights, "queue_weight")):
        for value, port in values:
            try:
                check(value)
                if port is not None:
                    check_port(port, known_ports)
            except ValueError as e:
                raise CliError(f"{flag if port is None else f'{flag} {value}@{port}'}: {e}") from None
            if port is None:
                setattr(cfg, default, value)
            else:
                per_port[port] = value
    _one_pace_each(args)
    for priority, lossless, port in args.lossless:
        try:
            check_priority_queues(priority + 1)
            if priority >= args.priority_queues:
                raise ValueError(f"priority {priority}: the ports have {args.priority_queues} priority queues")
            if port is not None:
                check_port(port, [p.number for p in ports])
        except ValueError as e:
            raise CliError(f"--lossless: {e}") from None
        cfg.lossless.append((priority, lossless, port))
    return cfg, args


def _one_pace_each(args: argparse.Namespace) -> None:
    """CliError when --queue-rate and --queue-bitrate are both given for all ports, or for one."""
    rates, bitrates = ({port: value for value, port in values} for values in (args.queue_rate, args.queue_bitrate))
    both = rates.keys() & bitrates.keys()
    if both:
        port = None if None in both else min(both)
        where, at = ("every port", "") if port is None else (f"port {port}", f"@{port}")
        raise CliError(f"--queue-rate {rates[port]}{at} and --queue-bitrate {bitrates[port]}{at}: {where}'s queues "
                       f"are paced in packets or in bits per second, not both")


def _log_file_handler(path: str) -> logging.Handler:
    """A handler appending to ``path``; CliError naming the file (and its missing directory)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CliError(f"cannot write log file {path}: directory {directory} does not exist")
    try:
        return logging.FileHandler(path)
    except OSError as e:
        raise CliError(f"cannot write log file {path}: {e.strerror}") from None


def setup_logging(level: str, path: str | None) -> None:
    py_level = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
                "warn": logging.WARNING, "error": logging.ERROR, "off": logging.CRITICAL + 1}[level]
    handler = _log_file_handler(path) if path else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(py_level)


# what starting a switch may raise for a reason its user can mend (said in one line)
START_ERRORS = (CliError, PortError, ProgramError, CompileError, NativeUnavailable, PortIOUnavailable, OSError)


def start_error(e: BaseException) -> str:
    if isinstance(e, FileNotFoundError):
        return f"cannot read {e.filename}: no such file"
    return str(e)


def wait_for_signal() -> None:
    """Until SIGINT or SIGTERM."""
    SignalStop((signal.SIGINT, signal.SIGTERM)).wait()
