"""Failure handling for a running `controller.fabric_controller.FabricController`.

`FailureHandler(controller, HeartbeatConfig(...)).start()` (or `controller.failover.start_failure_handling`,
which returns the running one if there is one); a `Feature` of the controller, so
``controller.feature(FailureHandler)`` finds it and ``controller.close()`` stops it;
``reroute=False`` runs steps 1, 2, 4 (without its reroute) and 5 only: data-plane failover alone,
the routes never recomputed:

1. **Heartbeats.** Every ``interval_ms`` the ticker thread sends one heartbeat
   (`controller.failover.heartbeat`) as a packet-out on every fabric port of every connected
   switch, over the controller's own P4Runtime streams. The neighbour's pipeline punts it back
   (``packetio.p4``); a packet-in handler on that switch's stream records it in the
   `PortMonitor` under (receiving switch, ingress port).
2. **Data-plane failover.** A port silent for ``multiplier`` intervals is dead: the ticker writes
   ``port_status: port -> port_down`` to its switch at once, and from then on the switch sends
   whatever ECMP, spray, flowlet or a TE pin chose for that port to the backup member of the same
   group (``failover``, installed for every multi-member group beforehand). No route is
   recomputed for this.
   The monitor only blames a port for its own silence (see `controller.failover.monitor`), and
   finds no port dead while a reroute runs or for a detection time after it (reconciling every
   switch at once makes every heartbeat late).
   Sooner, with link heartbeats on (``config.link_interval_ms``; the fabric's generator is the
   lab's): ``heartbeat_watch`` lists every fabric port with ``link_multiplier`` x
   ``link_interval_ms`` as its timeout, and each switch skips a port that long silent by itself,
   the same way, before this monitor has a verdict. That timeout is raised where the machine
   makes link heartbeats late (a switch skipped a port whose controller heartbeats kept coming)
   and lowered again once it calms (`controller.failover.link_timeout`).
3. **Reroute.** Then (a thread of its own) the links with a dead end are marked down in the
   controller's topology model, routes are recomputed and every connected switch reconciled.
   The dead port stays marked meanwhile, so nothing is ever sent into it (make-before-break:
   each switch's updates go in dependency order, new members and groups before the routes that
   use them, old ones deleted last).
4. **Repair.** A dead port that hears ``recover_after`` heartbeats in a row is alive: its
   ``port_status`` entry is deleted, the link marked up and the routes recomputed again.
5. **Localisation.** `failures()` names failed switches (every link down) and failed links;
   `controller.failover.metrics.FailureCollector` exports them (``controller.metrics``'s
   `fabric_metrics` serves it for a controller with a handler).

What a caller can read: `port_alive`, `link_up`, `dead_ports`, `failures`, `events` (every
transition with the time the last heartbeat was heard, decided and written), `reroutes`
(each with its start and end) and `heartbeats_sent_on` (heartbeats sent out of each port: a
port's egress counter counts them with its data). All times are ``time.monotonic()``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from p4.v1 import p4runtime_pb2

from controller.errors import SwitchError, WriteError
from controller.failover import entries as FE
from controller.failover.config import HeartbeatConfig
from controller.failover.heartbeat import Heartbeat, decode, encode
from controller.failover.localise import (
    Failure,
    Link,
    down_links,
    fabric_links,
    localise,
)
from controller.failover import link_timeout as LT
from controller.failover.monitor import PortKey, PortMonitor, Transition
from controller.p4names import PacketIn

if TYPE_CHECKING:
    from controller.fabric_controller import FabricController

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PortEvent:
    """A port found dead or alive again: ``last_heard`` (the last heartbeat before the
    decision), ``decided`` (the monitor's verdict), ``written`` (``port_status`` written to
    the switch; None when the switch could not be reached) and ``stretched`` (seconds the
    detection waited beyond its stated time because heartbeats were arriving late)."""

    switch: str
    port: int
    alive: bool
    last_heard: float
    decided: float
    written: float | None
    stretched: float = 0.0


@dataclass(frozen=True)
class Reroute:
    started: float
    finished: float
    down: tuple[str, ...]                  # links down in the model after it
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.finished - self.started


class FailureHandler:
    """Heartbeats, data-plane failover, reroute and localisation for one fabric controller."""

    def __init__(self, controller: FabricController, config: HeartbeatConfig | None = None, *,
                 reroute: bool = True, link_timeout_us: int | None = None) -> None:
        """``link_timeout_us``: the data plane's link-heartbeat timeout to start from, where an
        earlier handler on this machine raised it (default: the config's)."""
        self.controller = controller
        self.config = config or HeartbeatConfig()
        self.reroute_enabled = reroute      # False: data-plane failover alone, the model keeps every link
        self.p4info = controller.pipeline.p4info
        self.links: list[Link] = fabric_links(controller.model)
        self._fabric_ports = controller.fabric.fabric_ports()    # where link heartbeats go, per switch
        self._peer: dict[PortKey, PortKey] = {}
        for link in self.links:
            a, b = link.ends()
            self._peer[a], self._peer[b] = b, a
        self._names = {sw.device_id: sw.name for sw in controller.fabric.switches}
        # packet-out metadata of each port, built once (the ticker sends len(_peer) per interval)
        self._out_meta = {key: self.p4info.packet_out(b"", egress_port=key[1]).metadata for key in self._peer}
        self._macs = {sw.name: sw.mac for sw in controller.fabric.switches}
        self.monitor = PortMonitor(self._peer, self.config, time.monotonic())
        self._lock = threading.Lock()
        self._dead: set[PortKey] = set()
        self.events: list[PortEvent] = []
        self.reroutes: list[Reroute] = []
        self.heartbeats_sent = 0
        # per (switch, port): a port's egress counter counts these packet-outs besides its data
        self.heartbeats_sent_on: Counter[PortKey] = Counter()
        self.heartbeats_heard = 0
        # heartbeats not queued because a round was still waiting to be sent (see _send_all)
        self.heartbeats_held_back = 0
        self._ports_of = Counter(switch for switch, _ in self._peer)
        # heartbeats this handler did not send (an earlier handler's, delivered late): not evidence
        # of anything here, and their rounds would stand ahead of this handler's own
        self.heartbeats_not_ours = 0
        self._started_ns = time.monotonic_ns()
        self.link_timeout_us = self.config.link_timeout_us     # raised when the machine makes it too short
        if link_timeout_us is not None and self.link_timeout_us is not None:
            self.link_timeout_us = max(self.link_timeout_us, min(link_timeout_us, LT.MAX_TIMEOUT_US))
        self.link_timeout_changes: list[LT.Change] = []
        self.skips = LT.Skips()       # ports skipped by a switch, waiting to be judged spurious or real
        self._seq = 0
        self._sessions: dict[str, int] = {}
        self._resync: set[str] = set()
        self._rerouting = False
        self._reroute_end = 0.0
        self._writes: queue.Queue[Transition | str | None] = queue.Queue()
        self._stop = threading.Event()
        self._reroute_wanted = threading.Event()
        self._threads: list[threading.Thread] = []
        self._handlers = {name: self._handler_for(name) for name in controller.agents}

    # --- life cycle ------------------------------------------------------------------------

    def start(self) -> FailureHandler:
        """Install the failover entries, start heartbeats, monitoring and rerouting."""
        if self._threads:
            return self
        self._stop.clear()
        self.monitor = PortMonitor(self._peer, self.config, time.monotonic())
        for name, handler in self._handlers.items():
            self.controller.agents[name].packet_handlers.append(handler)
        self.controller.add_state_source(self)
        self.controller.add_feature(self)
        self.controller.reconcile([n for n, a in self.controller.agents.items() if _connected(a)])
        loops = [(self._tick_loop, "failover-ticker"), (self._write_loop, "failover-writer")]
        if self.reroute_enabled:
            loops.append((self._reroute_loop, "failover-reroute"))
        if self.link_timeout_us is not None:
            loops.append((self._link_timeout_loop, "failover-link-timeout"))
        for target, name in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop heartbeats; remove the failover entries from the switches and give the model its
        links back (the controller no longer knows which are down: routes use them all again)."""
        if not self._threads:
            return
        self._stop.set()
        self._reroute_wanted.set()
        self._writes.put(None)
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads = []
        for name, handler in self._handlers.items():
            handlers = self.controller.agents[name].packet_handlers
            if handler in handlers:
                handlers.remove(handler)
        with self._lock:
            self._dead.clear()
        for a, b in self.controller.model.down_links():
            self.controller.model.set_link_up(a, b, True)
        self.controller.remove_state_source(self)
        self._clear_switches()
        self.controller.remove_feature(self)

    def _clear_switches(self) -> None:
        """Delete what failure handling installed (nobody owns its tables once it stopped)."""
        tables = [self.p4info.table_id(t) for t in (FE.PORT_STATUS, FE.FAILOVER, FE.HEARTBEAT_WATCH)]
        for name, agent in self.controller.agents.items():
            conn = agent.conn          # read once: teardown may drop it meanwhile
            if conn is None or not conn.connected:
                continue
            try:
                found = [p4runtime_pb2.Entity(table_entry=e) for t in tables for e in conn.read_table(t)]
                if found:
                    conn.delete(found)
            except SwitchError as err:
                log.warning("%s: failover entries not removed: %s", name, err)

    def __enter__(self) -> FailureHandler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what the controller installs (StateSource) ----------------------------------------

    def owned(self, switch: str) -> set[tuple]:
        return FE.owned_tables(self.p4info)

    def entities(self, switch: str) -> list[p4runtime_pb2.Entity]:
        state = self.controller.forwarding.get(switch)
        found = FE.failover_entities(self.p4info, state) if state is not None else []
        timeout_us = self.link_timeout_us
        if timeout_us is not None:
            found += FE.watch_entities(self.p4info, self._fabric_ports.get(switch, []), timeout_us)
        return found

    # --- observation -----------------------------------------------------------------------

    def dead_ports(self) -> set[PortKey]:
        with self._lock:
            return set(self._dead)

    def port_alive(self, switch: str, port: int) -> bool:
        return (switch, port) not in self.dead_ports()

    def link(self, a: str, b: str) -> Link:
        for link in self.links:
            if {link.a, link.b} == {a, b}:
                return link
        raise KeyError(f"no switch-switch link between {a!r} and {b!r}")

    def link_up(self, a: str, b: str) -> bool:
        return not down_links([self.link(a, b)], self.dead_ports())

    def failures(self) -> list[Failure]:
        """Failed switches and links, as the heartbeats tell them."""
        return localise(self.links, down_links(self.links, self.dead_ports()))

    # --- heartbeats ------------------------------------------------------------------------

    def _handler_for(self, switch: str):
        def handle(packet: p4runtime_pb2.PacketIn) -> bool:
            beat = decode(packet.payload)
            if beat is None:
                return False
            now_ns = time.monotonic_ns()
            if beat.sent_ns < self._started_ns or beat.seq > self._seq:
                self.heartbeats_not_ours += 1
                return True
            port = self.p4info.packet_in_metadata(packet).get(PacketIn.INGRESS_PORT)
            expected = self._peer.get((switch, port))  # type: ignore[arg-type]
            if expected == (self._names.get(beat.device_id), beat.port):
                late = max(0, now_ns - beat.sent_ns) / 1e9      # sent by this process's ticker
                self.monitor.heard((switch, port), now_ns / 1e9, beat.seq, late)  # type: ignore[arg-type]
                self.heartbeats_heard += 1
            else:
                log.warning("%s port %s: heartbeat from device %d port %d, expected %s",
                            switch, port, beat.device_id, beat.port, expected)
            return True
        return handle

    def _send_all(self) -> None:
        self._seq += 1
        now_ns = time.monotonic_ns()
        held: dict[str, bool] = {}
        for (switch, port), (peer, _) in self._peer.items():
            agent = self.controller.agents[switch]
            conn = agent.conn
            if conn is None or not conn.connected or agent.programmed_on is not conn:
                continue        # no session, or a new one not programmed yet: nothing would punt it
            if switch not in held:
                # A whole round still queued for this switch: this process is too busy to send
                # them (a reroute reconciling every switch). Queued, this round would leave late
                # behind it and the backlog grow by a round each interval (126 packet-outs,
                # 4.9 s late, seen on an idle machine): it is left out, as a stalled stream
                # silences every port of its switch alike, and the monitor blames none for that.
                held[switch] = conn.pending_out >= self._ports_of[switch]
            if held[switch]:
                self.heartbeats_held_back += 1
                continue
            if self._sessions.get(switch) != id(conn):
                self._sessions[switch] = id(conn)    # a new session: its ports get a grace period
                self.monitor.grace(switch, time.monotonic())
                self._resync.add(switch)
            frame = encode(Heartbeat(agent.switch.device_id, port, self._seq, now_ns), self._macs[switch], self._macs[peer])
            try:
                conn.packet_out(p4runtime_pb2.PacketOut(payload=frame, metadata=self._out_meta[(switch, port)]))
                self.heartbeats_sent += 1
                self.heartbeats_sent_on[(switch, port)] += 1
            except SwitchError:
                pass   # the session just broke: the reconcile loop reconnects

    def _resync_liveness(self) -> None:
        """A switch back with a new session (maybe restarted, tables empty): once the reconcile
        loop has programmed it, write its dead ports again."""
        for switch in sorted(self._resync):
            agent = self.controller.agents[switch]
            if not (agent.status.in_sync and _connected(agent)):
                continue
            self._resync.discard(switch)
            self._writes.put(switch)

    def _tick_loop(self) -> None:
        interval = self.config.interval_s
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._send_all()
            if self._resync:
                self._resync_liveness()
            unreachable = frozenset(n for n, a in self.controller.agents.items() if not _connected(a))
            now = time.monotonic()
            # A reroute reconciles every switch at once: the controller's threads and the
            # targets' servers are busy and heartbeats run late. No new verdict of death while
            # one runs and for a detection time after it.
            hold = self._rerouting or now - self._reroute_end < self.config.detect_s
            changes = self.monitor.check(now, unreachable, hold)
            if changes:
                self._apply(changes)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay < -interval:          # fell behind (CPU starved): do not burst to catch up
                next_at = time.monotonic()
                delay = 0.0
            if delay > 0:
                self._stop.wait(delay)

    # --- data plane ------------------------------------------------------------------------

    def _apply(self, changes: list[Transition]) -> None:
        """Record the verdicts and hand them to the writer (the ticker never waits on a switch)."""
        with self._lock:
            for tr in changes:
                (self._dead.discard if tr.alive else self._dead.add)(tr.port)
        for tr in changes:
            self._writes.put(tr)

    def _write_loop(self) -> None:
        while True:
            item = self._writes.get()
            if item is None:
                return
            if isinstance(item, str):          # a switch to give its dead ports again
                for name, port in sorted(self.dead_ports()):
                    if name == item:
                        self._write_liveness(name, port, alive=False)
                continue
            switch, port = item.port
            written = self._write_liveness(switch, port, item.alive)
            self.events.append(PortEvent(switch, port, item.alive, item.last_heard, item.at, written, item.stretched))
            stretched = (f" (silent {1000 * (item.at - item.last_heard):.0f} ms; detection stretched by "
                         f"{1000 * item.stretched:.0f} ms: heartbeats were arriving that late)"
                         if item.stretched > 0.1 * self.config.detect_s else "")
            log.warning("%s port %d (to %s) %s%s", switch, port, self._peer[item.port][0],
                        "alive again" if item.alive else "dead", stretched)
            if self._writes.empty():
                self._reroute_wanted.set()      # the data plane first, then the routes

    def _write_liveness(self, switch: str, port: int, alive: bool) -> float | None:
        conn = self.controller.agents[switch].conn
        if conn is None or not conn.connected:
            return None
        update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.DELETE if alive else p4runtime_pb2.Update.INSERT,
                                      entity=FE.port_down(self.p4info, port))
        try:
            conn.write([update])
        except WriteError as err:
            if not (err.failures and all(f.code in ("ALREADY_EXISTS", "NOT_FOUND") for f in err.failures)):
                log.warning("%s: port_status for port %d not written: %s", switch, port, err)
                return None
        except SwitchError as err:
            log.warning("%s: port_status for port %d not written: %s", switch, port, err)
            return None
        return time.monotonic()

    # --- the data plane's link-heartbeat timeout ------------------------------------------

    def _link_timeout_loop(self) -> None:
        """Every CHECK_EVERY_S, the packets each switch moved off each port; a move is spurious
        once the controller hears that port, alive, in a round sent after the move was read, and
        its state did not change: then the timeout is raised; after CALM_S without any it is
        lowered again (`controller.failover.link_timeout`)."""
        skips, calm_since = self.skips, time.monotonic()
        while not self._stop.wait(LT.CHECK_EVERY_S):
            moved = self._moved_per_port()
            now = time.monotonic()
            skips.read(moved, self._seq, now)
            found = skips.spurious(lambda p, seq: self.monitor.last_round(p) > seq and self.monitor.is_alive(p),
                                   self._changed_since, now)
            if found:
                calm_since = now
                self._set_link_timeout(LT.raised(self.link_timeout_us), sorted(found), min(found.values()))
            elif now - calm_since > LT.CALM_S and self.link_timeout_us > self.config.link_timeout_us:
                calm_since = now
                self._set_link_timeout(LT.lowered(self.link_timeout_us, self.config.link_timeout_us), [], now)

    @property
    def rounds_sent(self) -> int:
        """Heartbeat rounds sent so far (a round: one heartbeat out of every fabric port)."""
        return self._seq

    def _changed_since(self, port: PortKey, since: float) -> bool:
        """A state change of ``port`` (found dead or alive again) decided at ``since`` or later."""
        return any((e.switch, e.port) == port and e.decided >= since for e in reversed(self.events))

    def _moved_per_port(self) -> dict[PortKey, int]:
        """Packets each switch moved off each of its fabric ports so far (one Read per switch)."""
        counter, moved = self.p4info.counter_id(FE.FAILED_OVER), {}
        for name, agent in self.controller.agents.items():
            conn = agent.conn
            if conn is None or not conn.connected:
                continue
            try:
                cells = conn.read_counter_cells(counter, self._fabric_ports.get(name, []))
            except SwitchError:
                continue
            moved.update({(name, port): packets for port, (packets, _) in cells.items()})
        return moved

    def _set_link_timeout(self, new: int, ports: list[PortKey], since: float) -> None:
        old, self.link_timeout_us = self.link_timeout_us, new
        self.link_timeout_changes.append(LT.Change(time.monotonic(), old, new, tuple(ports)))
        if new == old:           # at its cap: the spurious skips are recorded all the same
            log.warning("switches skipped ports the controller still heard (%s) since %.1f s ago, with the link "
                        "timeout at its cap of %.0f ms", ", ".join(f"{s} port {p}" for s, p in ports),
                        time.monotonic() - since, new / 1000)
            return
        if ports:
            log.warning("switches skipped ports the controller still heard (%s) since %.1f s ago: link heartbeats "
                        "arrive late on this machine; a switch now skips a port after %.0f ms of silence (was %.0f)",
                        ", ".join(f"{s} port {p}" for s, p in ports), time.monotonic() - since, new / 1000, old / 1000)
        else:
            log.warning("no healthy port skipped for %.0f s: a switch now skips a port after %.0f ms of silence "
                        "(was %.0f)", LT.CALM_S, new / 1000, old / 1000)
        for name, agent in self.controller.agents.items():
            conn = agent.conn
            if conn is None or not conn.connected:
                continue              # a switch that comes back gets the new value when it is reconciled
            try:
                conn.modify(FE.watch_entities(self.p4info, self._fabric_ports.get(name, []), new))
            except SwitchError as err:
                log.warning("%s: heartbeat_watch not rewritten: %s", name, err)

    # --- reroute ---------------------------------------------------------------------------

    def _reroute_loop(self) -> None:
        while not self._stop.is_set():
            self._reroute_wanted.wait(0.5)
            if self._stop.is_set():
                return
            self._reroute_wanted.clear()
            self.reroute()

    def reroute(self) -> Reroute | None:
        """Make the model's link states match the heartbeats, recompute and reconcile every
        connected switch; None when nothing changed."""
        model = self.controller.model
        down_now = {(link.a, link.b) for link in down_links(self.links, self.dead_ports())}
        in_model = set(model.down_links())
        if down_now == in_model:
            return None
        started = time.monotonic()
        self._rerouting = True
        try:
            return self._reroute(started, down_now, in_model)
        finally:
            self._rerouting = False
            self._reroute_end = time.monotonic()

    def _reroute(self, started: float, down_now: set[tuple[str, str]], in_model: set[tuple[str, str]]) -> Reroute:
        model = self.controller.model
        for a, b in down_now - in_model:
            model.set_link_up(a, b, False)
        for a, b in in_model - down_now:
            model.set_link_up(a, b, True)
        self.controller.recompute()
        names = [n for n, a in self.controller.agents.items() if _connected(a)]
        results = self.controller.reconcile(names)
        errors = {n: str(r) for n, r in results.items() if isinstance(r, BaseException)}
        record = Reroute(started, time.monotonic(), tuple(f"{a}-{b}" for a, b in sorted(down_now)), errors)
        self.reroutes.append(record)
        log.warning("reroute in %.0f ms; links down: %s%s", 1000 * record.seconds, ", ".join(record.down) or "none",
                    f"; failed on {sorted(errors)}" if errors else "")
        return record


def _connected(agent: object) -> bool:
    conn = getattr(agent, "conn", None)
    return conn is not None and conn.connected


def running_handler(controller: object) -> FailureHandler | None:
    """The failure handler running on ``controller`` (a `FabricController`), or None."""
    find = getattr(controller, "feature", None)
    return find(FailureHandler) if find is not None else None


def start_failure_handling(controller: FabricController, config: HeartbeatConfig | None = None, *,
                           reroute: bool = True, link_timeout_us: int | None = None) -> FailureHandler:
    """Start heartbeats, data-plane failover, reroute (unless ``reroute`` is False: data-plane
    failover alone) and localisation on ``controller``; the running handler when there is one
    already. ``handler.stop()`` (or ``controller.close()``) ends it."""
    return running_handler(controller) or FailureHandler(controller, config, reroute=reroute,
                                                         link_timeout_us=link_timeout_us).start()
