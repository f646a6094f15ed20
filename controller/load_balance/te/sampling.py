"""Packet sampling at the edge switches: the measurement source of traffic engineering.

Every switch with hosts copies each IP packet its hosts send to the controller with probability
1/``one_in`` (p4src/include/control/sampling.p4: table ``flow_sampling``, a random draw and a
packet-in per sample); `FlowSampler` installs those entries, reads the packet-ins, and counts
each sample as ``one_in`` times its frame's bytes for its 5-tuple. Called as a `FlowSource`, it returns the
flows seen since its previous call and the time that covered, which is what
`TrafficEngineer` rounds on (see controller/load_balance/te/elephants.py for why sampling).

    sampler = FlowSampler(controller, one_in=8)
    sampler.start()
    engineer = TrafficEngineer(controller.model, sampler, TeConfig(host_link_bps=...))
    ...
    sampler.stop()

The estimate of a flow's bytes is unbiased; with ``s`` samples in a period its relative error
is about 1/sqrt(s). Samples are counted per ingress port in the switch (``flow_samples``),
so `lost` says how many packet-ins never reached the sampler (a full queue, a reconnect).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from controller.entries import entity
from controller.p4names import Action, Counter, PacketIn, Table
from controller.telemetry.int_report import FlowKey, flow_key_of_frame
from controller.load_balance.te.elephants import FlowCounts
from controller.load_balance.te.flows import Flow, HostDirectory

log = logging.getLogger(__name__)

FLOW_SAMPLING = Table.FLOW_SAMPLING_FLOW_SAMPLING
SAMPLE = Action.FLOW_SAMPLING_SAMPLE
FLOW_SAMPLES = Counter.FLOW_SAMPLING_FLOW_SAMPLES
DEFAULT_ONE_IN = 16
PROBABILITY_SCALE = 1 << 16   # the data plane takes the probability in 1/65536
MAX_ONE_IN = PROBABILITY_SCALE
_POLL_S = 0.2        # how long a reader waits for a packet-in before checking for stop


@dataclass
class SamplerCounters:
    samples: int = 0         # packet-ins counted into a flow
    ignored: int = 0         # packet-ins from other ports or not TCP/UDP between fabric hosts
    unreadable: int = 0      # reader errors (a switch unreachable for a while)


class FlowSampler:
    """Samples what the hosts send, at every switch that has hosts; a `FlowSource`."""

    def __init__(self, controller, one_in: int = DEFAULT_ONE_IN) -> None:
        if not isinstance(one_in, int) or not 2 <= one_in <= MAX_ONE_IN:
            raise ValueError(f"sampling rate one in {one_in!r}: must be an integer in 2..{MAX_ONE_IN}")
        self.controller = controller
        self.probability = round(PROBABILITY_SCALE / one_in)     # in 1/65536, as the switch draws
        self.one_in = PROBABILITY_SCALE / self.probability        # exactly what that probability means
        self.directory = HostDirectory(controller.fabric)
        fabric = controller.fabric
        hosts = {h.name for h in fabric.hosts}
        self.host_ports: dict[str, list[int]] = {}
        for sw in fabric.switches:
            ports = sorted(p for p, peer in fabric.ports_of(sw.name).items() if peer in hosts)
            if ports:
                self.host_ports[sw.name] = ports
        self.counters = SamplerCounters()
        self._bytes: dict[Flow, int] = {}
        self._since = time.monotonic()
        self._lock = threading.Lock()
        self._enabled = False
        self._stop = threading.Event()
        self._readers: list[threading.Thread] = []
        controller.add_state_source(self)

    # --- state source: the flow_sampling entries ---------------------------------------------

    def owned(self, switch: str) -> set[tuple]:
        return {("table", self.controller.pipeline.p4info.table_id(FLOW_SAMPLING))}

    def entities(self, switch: str) -> list[p4runtime_pb2.Entity]:
        if not self._enabled:
            return []
        p4info = self.controller.pipeline.p4info
        return [entity(p4info.table_entry(FLOW_SAMPLING, {"ig_port": port}, action=SAMPLE,
                                          params={"probability": self.probability}))
                for port in self.host_ports.get(switch, [])]

    # --- running ----------------------------------------------------------------------------

    def start(self) -> "FlowSampler":
        """Install the sampling entries and read packet-ins until `stop`."""
        if self._readers:
            return self
        self._stop.clear()
        self._readers = [threading.Thread(target=self._read, args=(name,), name=f"sampler-{name}", daemon=True)
                         for name in self.host_ports]
        for t in self._readers:
            t.start()
        self._enabled = True
        self.controller.apply_now(sorted(self.host_ports))
        self.reset()
        return self

    def stop(self) -> None:
        """Remove the sampling entries and stop reading (nothing to do when not started)."""
        if not self._enabled and not self._readers:
            return
        self._enabled = False
        self.controller.apply_now(sorted(self.host_ports))
        self._stop.set()
        for t in self._readers:
            t.join()
        self._readers = []

    def __enter__(self) -> "FlowSampler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget what was counted; the next period starts now."""
        with self._lock:
            self._bytes = {}
            self._since = time.monotonic()

    def __call__(self) -> FlowCounts:
        """Estimated bytes per flow since the previous call (or `start`/`reset`)."""
        now = time.monotonic()
        with self._lock:
            counts, self._bytes = self._bytes, {}
            period, self._since = now - self._since, now
        return FlowCounts(counts, max(period, 1e-6))

    def switch_samples(self) -> int:
        """Samples the switches took, by their ``flow_samples`` counters (all host ports)."""
        counter = self.controller.pipeline.p4info.counter_id(FLOW_SAMPLES)
        total = 0
        for name, ports in self.host_ports.items():
            cells = self.controller.connection(name).read_counter(counter)
            total += sum(cells.get(p, (0, 0))[0] for p in ports)
        return total

    # --- packet-ins ---------------------------------------------------------------------------

    def _read(self, switch: str) -> None:
        p4info = self.controller.pipeline.p4info
        ports = set(self.host_ports[switch])
        while not self._stop.is_set():
            try:
                packet = self.controller.connection(switch).packet_in(timeout=_POLL_S)
            except Exception as err:  # noqa: BLE001 - a switch down for a while; keep trying
                self.counters.unreadable += 1
                log.debug("sampler %s: %s", switch, err)
                self._stop.wait(_POLL_S)
                continue
            if packet is None:
                continue
            port = p4info.packet_in_metadata(packet).get(PacketIn.INGRESS_PORT)
            self._count(port in ports, flow_key_of_frame(packet.payload), len(packet.payload))

    def _count(self, sampled_port: bool, key: FlowKey | None, frame_bytes: int) -> None:
        flow = None
        if sampled_port and key is not None and key.src_port and key.dst_port:
            try:
                flow = self.directory.flow(key)
            except KeyError:
                flow = None
        with self._lock:
            if flow is None:
                self.counters.ignored += 1
                return
            self.counters.samples += 1
            self._bytes[flow] = self._bytes.get(flow, 0) + round(frame_bytes * self.one_in)
