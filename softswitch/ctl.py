"""Run-time control of a softswitch, outside P4Runtime: queues and traffic classes, lossless
classes (priority flow control), statistics.

The queue commands mirror simple_switch_CLI's, so scripts can drive either target (BMv2 takes
the first two, with their optional priority; the others are softswitch's alone). Without a port
a setting is every port's; with a port, each of its classes'; with a priority too, that class's
alone (softswitch/queues.py):

    set_queue_rate <rate_pps> [<egress_port> [<priority>]]
                                                   packets per second of each class, 0 = unlimited
    set_queue_depth <depth_pkts> [<egress_port> [<priority>]]
    set_queue_bitrate <bits_per_s> [<egress_port> [<priority>]]
                                                   bits per second of the port's link (with a priority:
                                                   of the class alone, a shaper), 0 = unlimited, else
                                                   1000..400000000000; a frame costs its bytes on the
                                                   wire; clears the packet rate (set_queue_rate clears
                                                   the bit rate)
    set_queue_weight <weight> [<egress_port> [<priority>]]
                                                   0 = strict priority (the default), else 1..1000
                                                   packets a turn of the weighted round robin between
                                                   the weighted classes (softswitch/classes.py)
    get_queue <egress_port>                        depth, rate_pps, bitrate (the link's), occupancy,
                                                   drops, priority_queues, and "classes": each class's
                                                   settings, counters and PFC figures (JSON)
    classes                                        every port's classes as get_queue gives them, and
                                                   the watchdog (JSON)
    set_lossless <priority> <xoff_bytes> <xon_bytes> <headroom_bytes> <quanta> [<port>]
                                                   the class lossless on the port (every data port
                                                   without one): 802.1Qbb PFC (softswitch/pfc.py)
    clear_lossless <priority> [<port>]             the class lossy again
    set_pfc_watchdog <detect_ms> <restore_ms> <poll_ms> <drop|forward>
                                                   the PFC watchdog (detect_ms 0: off)
    stats                                          packet counters (JSON; an AF_XDP port's also counts
                                                   kernel_drops: frames the kernel dropped before the
                                                   switch read them)
    packet_path                                    compiled or Python, port I/O batched or not, building,
                                                   last build error, native or not and why, port I/O
                                                   (AF_XDP or AF_PACKET) and why, port by port (JSON)

Protocol: one command per line over TCP (``--runtime-addr``); the answer is one line,
``ok``, a JSON object, or ``error: <why>``. A line longer than MAX_LINE bytes is answered
with an error and the connection closed (the server never holds more than that of one line);
a blank line is answered with an error. ``softswitch-ctl`` is the client: exit status 0 for
an answer, 1 for an error the switch answered, 2 when the command line is wrong or the switch
cannot be reached.
"""
from __future__ import annotations

import dataclasses
import json
import socket
import socketserver
import sys
import threading

from .addr import host_port_arg, parse_host_port
from .args import OneLineErrors
from .pfc import Lossless, Watchdog

MAX_LINE = 4096    # bytes of one command line; the longest real command is a few dozen


class RuntimeControlServer:
    def __init__(self, switch, addr: str):
        self.switch = switch
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    self._serve_lines()
                except OSError:         # the client went away mid-line or mid-answer
                    pass

            def _serve_lines(self) -> None:
                while True:
                    # readline(limit) stops after MAX_LINE + 1 bytes: a line without an end
                    # never grows the server's memory beyond that.
                    raw = self.rfile.readline(MAX_LINE + 1)
                    if not raw:
                        return
                    if len(raw) > MAX_LINE:
                        self.wfile.write(f"error: command longer than {MAX_LINE} bytes; closing\n".encode())
                        return
                    self.wfile.write((outer.execute(raw.decode(errors="replace")) + "\n").encode())

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        try:
            self._server = socketserver.ThreadingTCPServer(parse_host_port(addr), Handler)
        except OSError as e:
            raise OSError(f"runtime control address {addr}: {e.strerror}") from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="runtime-ctl", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def execute(self, line: str) -> str:
        words = line.split()
        if not words:
            return "error: empty command (try get_queue <egress_port> or stats)"
        cmd, args = words[0], words[1:]
        dp = self.switch.dataplane
        action = None
        if cmd == "set_pfc_watchdog" and args:      # its last word is the action
            action, args = args[-1], args[:-1]
        try:
            nums = [int(a) for a in args]
        except ValueError:
            return f"error: {cmd}: arguments must be integers"
        try:
            setter = {"set_queue_rate": dp.set_queue_rate, "set_queue_bitrate": dp.set_queue_bitrate,
                      "set_queue_depth": dp.set_queue_depth, "set_queue_weight": dp.set_queue_weight}.get(cmd)
            if setter is not None and len(nums) in (1, 2, 3):
                setter(*nums)
                return "ok"
            if cmd == "get_queue" and len(nums) == 1:
                dp.check_port(nums[0])
                return json.dumps(port_view(dp, nums[0]))
            if cmd == "classes" and not nums:
                return json.dumps({"ports": {p: port_view(dp, p) for p in sorted(dp.ports)},
                                   "watchdog": dataclasses.asdict(dp.pfc_watchdog), "now_us": dp.now_us()})
            if cmd == "set_lossless" and len(nums) in (5, 6):
                dp.set_lossless(nums[0], Lossless(*nums[1:5]), nums[5] if len(nums) == 6 else None)
                return "ok"
            if cmd == "clear_lossless" and len(nums) in (1, 2):
                dp.set_lossless(nums[0], None, nums[1] if len(nums) == 2 else None)
                return "ok"
            if cmd == "set_pfc_watchdog" and len(nums) == 3:
                dp.set_pfc_watchdog(Watchdog(nums[0] * 1000, nums[1] * 1000, nums[2] * 1000, action))
                return "ok"
            if cmd == "stats" and not nums:
                ports = {p.number: dict(zip(("iface", "rx", "tx"), (p.iface, *dp.port_counters(p.number)[:2])))
                         for p in dp.ports.values()}
                for number, port in ports.items():     # an AF_XDP port: what the kernel dropped before it read
                    if getattr(dp, "port_io", {}).get(number) and dp.port_io[number].kind == "af_xdp":
                        port["kernel_drops"] = dp.kernel_drops(number)
                return json.dumps({"counters": dataclasses.asdict(dp.counters), "ports": ports})
            if cmd == "packet_path" and not nums:
                prog = dp.program
                return json.dumps({"program": prog is not None, "compiled": bool(prog and prog.compiled),
                                   "batched_io": dp.batched_io, **self.switch.fast_path.status(),
                                   **self.switch.native_path.status(), **self.switch.port_io.status(dp)})
        except ValueError as e:
            return f"error: {e}"
        return f"error: unknown command or wrong arguments: {line!r}"


def port_view(dp, port: int) -> dict:
    """``get_queue``'s answer: the port's queues (depth and packet rate of its lowest class, as
    simple_switch_CLI users read them; bitrate: its link's), and every class's figures."""
    classes = dp.class_stats(port)
    return {"port": port, "depth": classes[-1]["depth"], "rate_pps": classes[-1]["rate_pps"],
            "bitrate": dp.link_bitrate(port), "occupancy": sum(c["occupancy"] for c in classes),
            "drops": sum(c["drops"] for c in classes), "priority_queues": dp.priority_queues,
            "classes": classes, "malformed": dp.mac_control_malformed(port)}


def send_command(addr: str, command: str, timeout: float = 5.0) -> str:
    with socket.create_connection(parse_host_port(addr), timeout=timeout) as s:
        s.sendall(command.encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    return buf.decode(errors="replace").strip()


def packet_errors(addr: str, timeout: float = 5.0) -> dict[str, int]:
    """The packets that made the program fail on the switch at ``addr`` (its --runtime-addr),
    by the name of what was raised; empty when none did. OSError when the switch cannot be
    reached, ValueError when it answers with an error."""
    answer = send_command(addr, "stats", timeout)
    if not answer.startswith("{"):
        raise ValueError(f"stats from {addr}: {answer or 'no answer'}")
    counters = json.loads(answer)["counters"]
    kinds = dict(counters.get("error_kinds", {}))
    unnamed = counters["errors"] - sum(kinds.values())
    if unnamed:                 # a switch that counts errors without their names (older)
        kinds["unnamed"] = unnamed
    return kinds


def main(argv: list[str] | None = None) -> int:
    p = OneLineErrors(prog="softswitch-ctl", description=__doc__.split("\n\n")[0])
    p.add_argument("--addr", type=host_port_arg, default="127.0.0.1:9090",
                   help="the switch's --runtime-addr, HOST:PORT")
    p.add_argument("command", nargs="+", help="e.g. set_queue_rate 1000 2")
    args = p.parse_args(argv)
    command = " ".join(args.command)
    if not command.strip():
        p.error("empty command (e.g. get_queue 1, stats)")
    if "\n" in command or len(command.encode()) >= MAX_LINE:
        p.error(f"the command must be one line shorter than {MAX_LINE} bytes")
    try:
        answer = send_command(args.addr, command)
    except OSError as e:
        print(f"softswitch-ctl: cannot reach {args.addr}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(answer)
    return 1 if answer.startswith("error") else 0


if __name__ == "__main__":
    sys.exit(main())
