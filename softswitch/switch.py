"""A softswitch device: its ports, data plane, current pipeline and servers, started and
stopped as one."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from .dataplane import DEFAULT_DROP_PORT, Dataplane
from .fastpath import FastPath
from .native.mode import DEFAULT_MODE as NATIVE_DEFAULT_MODE, NativePath, NativeProgram
from .native.xsk import DEFAULT_MODE as PORT_IO_DEFAULT_MODE, PortIOChoice
from .pipeline.program import Program
from .pfc import Lossless, Watchdog
from .ports import Port, PortSpec, open_ports
from .queues import DEFAULT_BITRATE, DEFAULT_DEPTH, DEFAULT_RATE
from .runtime.pre import ReplicationEngine

log = logging.getLogger("softswitch")


@dataclass
class SwitchConfig:
    device_id: int = 0
    ports: list[PortSpec] = field(default_factory=list)
    cpu_port: int | None = None
    drop_port: int = DEFAULT_DROP_PORT
    grpc_addr: str = "127.0.0.1:9559"
    runtime_addr: str | None = None
    json_path: str | None = None
    queue_depth: int = DEFAULT_DEPTH
    queue_rate: int = DEFAULT_RATE             # packets/s, or
    queue_bitrate: int = DEFAULT_BITRATE       # bits/s (queues.py): one of the two paces, the other 0
    port_queue_depths: dict[int, int] = field(default_factory=dict)
    port_queue_rates: dict[int, int] = field(default_factory=dict)
    port_queue_bitrates: dict[int, int] = field(default_factory=dict)   # a port in one of the two pace dicts
    queue_weight: int = 0                      # every class's weight (classes.py): 0 strict priority
    port_queue_weights: dict[int, int] = field(default_factory=dict)
    lossless: list[tuple[int, Lossless, int | None]] = field(default_factory=list)   # (priority, thresholds, port)
    pfc_watchdog: Watchdog | None = None
    priority_queues: int = 1                   # egress queues per port (simple_switch's --priority-queues)
    arbitration_timeout: float | None = None   # seconds a new StreamChannel has to arbitrate (None: default)
    compiled: str = "auto"                     # the compiled packet path: auto, now or off (fastpath.py)
    native: str = NATIVE_DEFAULT_MODE          # the native data path: auto, on or off (native/mode.py)
    port_io: str = PORT_IO_DEFAULT_MODE        # the native path's port I/O: auto, af_xdp or packet (native/xsk.py)


class Switch:
    """Owns everything one device runs. ``start`` opens ports and servers or fails leaving
    nothing open; ``stop`` undoes it."""

    def __init__(self, config: SwitchConfig):
        self.config = config
        self.device_id = config.device_id
        self.ports: dict[int, Port] = {}
        self.dataplane: Dataplane | None = None
        self.p4info = None                 # p4.config.v1.P4Info of the committed pipeline
        self.device_config: bytes = b""    # its BMv2 JSON
        self.cookie: int = 0
        self.config_lock = threading.RLock()
        self.fast_path = FastPath(config.compiled)
        self.native_path = NativePath(config.native)
        self.port_io = PortIOChoice(config.port_io)
        self._servers: list = []

    @property
    def program(self) -> Program | None:
        return self.dataplane.program if self.dataplane else None

    def start(self) -> None:
        from .ctl import RuntimeControlServer
        from .p4runtime.server import P4RuntimeServer

        cfg = self.config
        program = None
        if cfg.json_path:
            with open(cfg.json_path, "rb") as f:
                data = f.read()
            program = Program(data)
            self.device_config = data
        native = self.native_path.prepare(program) if program is not None else None
        if program is not None and native is None:     # the compiled path serves what the native one does not
            self.fast_path.prepare(program)
        self.ports = open_ports(cfg.ports)
        try:
            dp = self._new_dataplane(native)
            for port, depth in cfg.port_queue_depths.items():
                dp.set_queue_depth(depth, port)
            for port, rate in cfg.port_queue_rates.items():
                dp.set_queue_rate(rate, port)
            for port, bits_per_s in cfg.port_queue_bitrates.items():
                dp.set_queue_bitrate(bits_per_s, port)
            if cfg.queue_weight:
                dp.set_queue_weight(cfg.queue_weight)
            for port, weight in cfg.port_queue_weights.items():
                dp.set_queue_weight(weight, port)
            for priority, lossless, port in cfg.lossless:
                dp.set_lossless(priority, lossless, port)
            if cfg.pfc_watchdog is not None:
                dp.set_pfc_watchdog(cfg.pfc_watchdog)
            self.dataplane = dp
            self._set_program(dp, program, None, native)
            if cfg.runtime_addr:
                ctl = RuntimeControlServer(self, cfg.runtime_addr)
                ctl.start()
                self._servers.append(ctl)
            dp.start()
            self.port_io.started(dp)
            # last: whoever waits for the P4Runtime port (Mininet's readiness check, a restart)
            # finds the run-time control port and the data plane already up
            grpc_server = P4RuntimeServer(self, cfg.grpc_addr)
            grpc_server.start()
            self._servers.append(grpc_server)
        except BaseException:
            self.stop()
            raise
        log.info("device %d up: %d ports, P4Runtime on %s", cfg.device_id, len(self.ports), cfg.grpc_addr)

    # -- which data plane runs the program ---------------------------------------------------
    def _new_dataplane(self, native: NativeProgram | None):
        cfg = self.config
        args = (self.ports, cfg.cpu_port, cfg.drop_port, cfg.queue_depth, cfg.queue_rate, cfg.priority_queues,
                cfg.queue_bitrate)
        if native is None:
            return Dataplane(*args)
        from .native.dataplane import NativeDataplane
        return NativeDataplane(native.library, *args, port_io=cfg.port_io)

    def _set_program(self, dp, program: Program | None, engine: ReplicationEngine | None,
                     native: NativeProgram | None) -> None:
        """``program`` (with its replication ``engine``) into ``dp``, not yet running or locked."""
        with dp.lock:
            dp.set_program(program)
            if engine is not None:
                dp.pre = engine
            if native is not None:
                native.mirror(dp, native)      # the Python objects' state into the library's, and later writes
        self.native_path.in_use = native is not None
        if native is None:
            self.fast_path.follow(program, dp)

    def use_program(self, program: Program, engine: ReplicationEngine, native: NativeProgram | None) -> None:
        """A committed pipeline's program takes effect: on the data plane that runs now, under its
        lock, when both are Python; else a new data plane takes the old one's ports, queue
        settings and packet-in handler, and the old one stops first (packets wait in the
        sockets meanwhile)."""
        old = self.dataplane
        if old is None:
            return
        # a native program always gets a data plane of its own: its objects start empty (the
        # same library's data plane would keep the previous program's entries)
        if native is None and type(old) is Dataplane:
            self._set_program(old, program, engine, native)
            return
        new = self._new_dataplane(native)
        new.take_queue_settings(old)
        new.take_lossless_settings(old)
        new.on_packet_in = old.on_packet_in
        self._set_program(new, program, engine, native)
        old.stop()             # closes its AF_XDP sockets, so that the new one can open its own
        self.dataplane = new
        new.start()
        self.port_io.started(new)
        log.info("device %d: data plane now %s", self.device_id, "native" if native else "Python")

    def stop(self) -> None:
        self.fast_path.stop()
        for srv in reversed(self._servers):
            try:
                srv.stop()
            except Exception:      # stopping must go on whatever one server does
                log.exception("error while stopping %s", type(srv).__name__)
        self._servers.clear()
        if self.dataplane is not None:
            self.dataplane.stop()
            self.dataplane = None
        for p in self.ports.values():
            p.close()
        self.ports = {}
