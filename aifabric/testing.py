"""pytest fixtures for testing your own controller against a running fabric (a pytest plugin).

Installing aifabric registers this module with pytest (entry point ``pytest11``), so a test
asks for ``fabric`` and gets a running fat-tree, brought up once per test module and once per
P4 target (softswitch always, BMv2 where ``simple_switch_grpc`` is on PATH), torn down after the
module's last test, also when a test fails or the run is interrupted (Ctrl-C, SIGTERM)::

    import pytest
    pytestmark = pytest.mark.fabric(k=4, controller="aifabric")   # or controller="none"

    def test_my_app(fabric):
        desc = fabric.description                  # aifabric.lab.description.FabricDescription
        edge = fabric.switch("p0e0")               # .p4runtime_address, .device_id
        run_my_controller(fabric.description_path) # the file any controller can read
        assert fabric.wait_reachable("p0e0h0", "p1e0h0")

Options of ``pytest.mark.fabric`` (`FabricOptions`): ``topo`` ("fattree", "leafspine"), ``k``,
``leaves``/``spines``/``hosts_per_leaf``, ``controller`` ("aifabric": ours pushes the pipeline and
routes; "none": switches with no pipeline, yours owns them) and ``targets``. ``pytest
--fabric-targets softswitch`` narrows the targets for a run. For one fabric per session, wrap
`running_fabric` in a session-scoped fixture of your own.

Only one fabric can run in a network namespace at a time (switch names and gRPC ports are the
namespace's); a lab of your own runs beside the tests under a name (`aifabric --lab NAME up`).

Every test of a run in which a lab runs (this fixture's or any `aifabric.lab.lab.Lab`) fails
when a softswitch's program failed on a packet during it (or since the test before): such a
packet is dropped, and a test that expects nothing would pass on it
(`aifabric.lab.packet_errors`).
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pytest

from aifabric.lab.description import FabricDescription, HostDescription, PipelineFiles, SwitchDescription
from controller import entries as E
from controller.fabric_controller import FabricController, PortCounter
from controller.p4info import P4Info
from controller.switch import SwitchConnection
from topologies.fabric import Fabric, fat_tree, leaf_spine

if TYPE_CHECKING:
    from emulation.testbed import HostPort

TOPOLOGIES = ("fattree", "leafspine")
CONTROLLERS = ("aifabric", "none")
TARGETS = ("softswitch", "bmv2")
BMV2_EXECUTABLE = "simple_switch_grpc"


@dataclass(frozen=True)
class FabricOptions:
    """What ``pytest.mark.fabric(...)`` asks for."""

    topo: str = "fattree"
    k: int = 4
    leaves: int = 2
    spines: int = 2
    hosts_per_leaf: int = 2
    controller: str = "aifabric"
    targets: tuple[str, ...] = TARGETS

    def __post_init__(self) -> None:
        if self.topo not in TOPOLOGIES:
            raise ValueError(f"fabric topo={self.topo!r}: one of {', '.join(TOPOLOGIES)}")
        if self.controller not in CONTROLLERS:
            raise ValueError(f"fabric controller={self.controller!r}: one of {', '.join(CONTROLLERS)}")
        unknown = [t for t in self.targets if t not in TARGETS]
        if unknown or not self.targets:
            raise ValueError(f"fabric targets={self.targets!r}: some of {', '.join(TARGETS)}")

    @classmethod
    def from_marker(cls, marker: Any | None) -> "FabricOptions":
        kwargs = dict(marker.kwargs) if marker is not None else {}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown or (marker is not None and marker.args):
            raise ValueError(f"pytest.mark.fabric takes keyword options {', '.join(sorted(known))}; "
                             f"got {', '.join(unknown) or marker.args}")
        if "targets" in kwargs:
            kwargs["targets"] = (kwargs["targets"],) if isinstance(kwargs["targets"], str) else tuple(kwargs["targets"])
        return cls(**kwargs)

    def build(self) -> Fabric:
        if self.topo == "fattree":
            return fat_tree(self.k)
        return leaf_spine(self.leaves, self.spines, self.hosts_per_leaf)


class RunningFabric:
    """A running fabric as a test sees it: where its switches are, its hosts, packets, counters."""

    def __init__(self, lab: Any, description_path: Path) -> None:
        self.lab = lab
        self.description_path = description_path
        self.description: FabricDescription = lab.description()
        self.target = self.description.target
        self.bring_up_s = lab.bring_up.total_s     # seconds: switch targets, then our controller's programming
        self._readers: dict[str, SwitchConnection] = {}
        self._lock = threading.Lock()

    # --- where things are ------------------------------------------------------------------

    @property
    def switches(self) -> list[SwitchDescription]:
        return self.description.switches

    def switch(self, name: str) -> SwitchDescription:
        return self.description.switch(name)

    @property
    def hosts(self) -> list[HostDescription]:
        return self.description.hosts

    @property
    def pipeline(self) -> PipelineFiles:
        """The P4Info and BMv2 JSON files (what a controller pushes)."""
        assert self.description.pipeline is not None
        return self.description.pipeline

    @property
    def controller(self) -> FabricController | None:
        """Our controller, when the fabric runs with it."""
        return self.lab.controller

    def node(self, host: str) -> Any:
        """The Mininet host: ``.cmd("ip -br addr")`` runs a shell command in it, ``.popen([...])``
        starts a process there."""
        self.description.host(host)             # KeyError naming the host when unknown
        return self.lab.host(host)

    def cmd(self, host: str, command: str) -> str:
        """Run a shell command in ``host`` and return its output."""
        return self.node(host).cmd(command)

    # --- reachability ----------------------------------------------------------------------

    def ping(self, src: str, dst: str, count: int = 1, family: str = "ipv4") -> bool:
        """True when ``src`` gets an echo reply from ``dst`` (within 1 s per request)."""
        addr = self._address(dst, family)
        out = self.cmd(src, f"ping {'-6' if family == 'ipv6' else '-4'} -n -q -c {count} -i 0.2 -W 1 "
                            f"{shlex.quote(addr)}")
        return " 0 received" not in out and "received" in out

    def wait_reachable(self, src: str, dst: str, timeout: float = 15.0, family: str = "ipv4") -> bool:
        """Ping until ``dst`` answers ``src`` or ``timeout`` s passed; whether it answered."""
        deadline = time.monotonic() + timeout
        while True:
            if self.ping(src, dst, family=family):
                return True
            if time.monotonic() >= deadline:
                return False

    def all_pairs(self, family: str = "ipv4") -> Any:
        """Every host pings every other (`aifabric.lab.checks.all_pairs`): a `traffic.Reachability`."""
        from aifabric.lab import checks
        return checks.all_pairs(self.lab, family)

    def _address(self, host: str, family: str) -> str:
        h = self.description.host(host)
        return (h.ipv6 if family == "ipv6" else h.ipv4).split("/")[0]

    # --- packets ---------------------------------------------------------------------------

    def send(self, host: str, packet: Any, count: int = 1) -> None:
        """Send a frame (a scapy packet from ``Ether()`` on, or bytes) out of ``host``'s interface."""
        frame = bytes(packet)
        with self._port(host) as port:
            for _ in range(count):
                port.send(frame)

    @contextmanager
    def capture(self, host: str) -> Iterator["Capture"]:
        """Frames arriving at ``host`` from now on::

            with fabric.capture("p1e0h0") as cap:
                fabric.send("p0e0h0", Ether(...) / IP(...) / UDP(...))
                got = cap.wait_for(lambda p: UDP in p and p[UDP].dport == 5000)
        """
        with self._port(host) as port:
            yield Capture(host, port)

    @contextmanager
    def _port(self, host: str) -> Iterator["HostPort"]:
        from emulation.testbed import HostPort     # imports Mininet: only once a fabric runs
        h = self.description.host(host)
        port = HostPort(0, f"{h.switch}-eth{h.port}", h.interface, f"/proc/{self.node(host).pid}/ns/net")
        port.open()
        try:
            yield port
        finally:
            port.close()

    # --- reading the switches --------------------------------------------------------------

    def reader(self, switch: str) -> SwitchConnection:
        """A P4Runtime connection to ``switch`` for reads only (no arbitration: it never takes
        primary from anyone), kept until teardown."""
        with self._lock:
            conn = self._readers.get(switch)
            if conn is None or not conn.connected:
                sw = self.switch(switch)
                conn = SwitchConnection(sw.name, sw.p4runtime_address, sw.device_id, p4info=self.lab.pipeline.p4info)
                conn.connect_for_reads()
                self._readers[switch] = conn
            return conn

    def read_counter(self, switch: str, counter: str = E.EGRESS_PORT_COUNTER,
                     p4info: P4Info | None = None) -> dict[int, PortCounter]:
        """index (a port, for the fabric's port counters) -> packets and bytes, non-zero cells
        only; ``counter`` is named in ``p4info`` (default: the fabric program's)."""
        info = p4info or self.lab.pipeline.p4info
        cells = self.reader(switch).read_counter(info.counter_id(counter))
        return {i: PortCounter(p, b) for i, (p, b) in sorted(cells.items()) if p or b}

    def read_table(self, switch: str, table: str, p4info: P4Info | None = None) -> list[Any]:
        """Every entry of ``table`` on ``switch`` (p4.v1 TableEntry messages)."""
        info = p4info or self.lab.pipeline.p4info
        return self.reader(switch).read_table(info.table_id(table))

    def close(self) -> None:
        with self._lock:
            for conn in self._readers.values():
                conn.close()
            self._readers.clear()


class Capture:
    """Frames arriving at one host, parsed with scapy (``Ether``)."""

    def __init__(self, host: str, port: "HostPort") -> None:
        self.host = host
        self._port = port

    def packets(self, timeout: float = 1.0, count: int | None = None) -> list[Any]:
        """What arrives within ``timeout`` s (sooner once ``count`` arrived, or 0.2 s after the
        last frame)."""
        from scapy.layers.l2 import Ether
        return [Ether(f) for f in self._port.receive(timeout=timeout, count=count)]

    def wait_for(self, match: Callable[[Any], bool], timeout: float = 3.0) -> Any | None:
        """The first packet for which ``match(packet)`` is true within ``timeout`` s, or None."""
        from scapy.layers.l2 import Ether
        frame = self._port.wait_for(lambda f: match(Ether(f)), timeout=timeout)
        return Ether(frame) if frame is not None else None


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP end the run as Ctrl-C does (pytest then tears the fixtures down);
    only from the main thread, where Python delivers signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    saved = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


@contextmanager
def running_fabric(options: FabricOptions, target: str, log_dir: Path,
                   description_path: Path | None = None) -> Iterator[RunningFabric]:
    """Bring a fabric up (`aifabric.lab.lab.Lab`), write its description, yield it, tear it down
    whatever happens."""
    from aifabric.lab.lab import Lab

    log_dir.mkdir(parents=True, exist_ok=True)
    description_path = description_path or log_dir / "fabric.json"
    with _signals_interrupt(), Lab(options.build(), target=target, log_dir=log_dir,
                                   run_controller=options.controller == "aifabric") as lab:
        running = RunningFabric(lab, description_path)
        running.description.write(description_path)
        try:
            yield running
        finally:
            running.close()
            description_path.unlink(missing_ok=True)      # the fabric it describes is going away


# --- the pytest plugin ---------------------------------------------------------------------

def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("aifabric")
    group.addoption("--fabric-targets", default=",".join(TARGETS),
                    help="P4 targets the `fabric` fixture runs on (comma-separated; default: "
                         "softswitch,bmv2 - BMv2 where simple_switch_grpc is on PATH)")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "fabric(**options): how the `fabric` fixture brings its fabric up "
                                       "(aifabric.testing.FabricOptions: topo, k, controller, targets, ...)")


def _parametrized_directly(metafunc: Any, name: str) -> bool:
    for marker in metafunc.definition.iter_markers("parametrize"):
        names = marker.args[0] if marker.args else marker.kwargs.get("argnames", "")
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        if name in names:
            return True
    return False


def pytest_generate_tests(metafunc: Any) -> None:
    """A test using ``fabric`` runs once per target; the module's tests share one fabric each."""
    if "fabric_target" not in metafunc.fixturenames or _parametrized_directly(metafunc, "fabric"):
        return
    try:
        options = FabricOptions.from_marker(metafunc.definition.get_closest_marker("fabric"))
    except (TypeError, ValueError) as err:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: {err}") from None
    wanted = [t.strip() for t in metafunc.config.getoption("fabric_targets").split(",") if t.strip()]
    params = []
    for target in options.targets:
        if target not in wanted:
            continue
        marks = []
        if target == "bmv2" and shutil.which(BMV2_EXECUTABLE) is None:
            marks.append(pytest.mark.skip(reason=f"BMv2 {BMV2_EXECUTABLE} is not on PATH"))
        params.append(pytest.param(target, marks=marks, id=target))
    if not params:
        params = [pytest.param("none", marks=pytest.mark.skip(reason=f"no fabric target left: the test wants "
                                                                     f"{options.targets}, --fabric-targets {wanted}"))]
    metafunc.parametrize("fabric_target", params, indirect=True, scope="module")


@pytest.fixture(scope="module")
def fabric_target(request: Any) -> str:
    """The P4 target of this module's fabric (parametrised by the plugin)."""
    return getattr(request, "param", "softswitch")


@pytest.fixture(scope="module")
def fabric(request: Any, fabric_target: str, tmp_path_factory: Any) -> Iterator[RunningFabric]:
    """A running fabric for this module (see the module docstring)."""
    if os.geteuid() != 0:
        pytest.skip("a fabric needs root (Mininet, network namespaces)")
    options = FabricOptions.from_marker(request.node.get_closest_marker("fabric"))
    log_dir = tmp_path_factory.mktemp(f"fabric-{fabric_target}")
    with running_fabric(options, fabric_target, log_dir) as running:
        yield running


_PACKET_ERRORS: Any = None     # an aifabric.lab.packet_errors.PacketErrorWatch, once a lab ran


@pytest.fixture(autouse=True)
def switches_failed_on_no_packet() -> Iterator[None]:
    """Fails the test when a lab's softswitch failed to process a packet meanwhile (see the
    module docstring). Costs nothing where no lab was ever imported, a ``stats`` query per
    switch where one runs."""
    yield
    global _PACKET_ERRORS
    lab_module = sys.modules.get("aifabric.lab.lab")
    if lab_module is None:
        return
    from aifabric.lab import packet_errors
    if _PACKET_ERRORS is None:
        _PACKET_ERRORS = packet_errors.PacketErrorWatch()
    moved = _PACKET_ERRORS.moved(lab_module.started_labs(), lab_module.forget_lab)
    if moved:
        pytest.fail(f"packets the switches failed to process (dropped, see the switch logs): "
                    f"{packet_errors.describe(moved)}", pytrace=False)
