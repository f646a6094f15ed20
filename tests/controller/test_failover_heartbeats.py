"""Which switches the failure handler sends a heartbeat round to (controller/failover/handler.py),
without a fabric: sessions stand in for the controller's, recording what is queued on them."""
from __future__ import annotations

from controller.fabric_controller import FabricController, Pipeline
from controller.failover import FailureHandler, HeartbeatConfig
from topologies.fabric import fat_tree


class _Session:
    """A connected session; its stream takes what is queued at once (``stalled``: never), and
    ``pending`` messages are still waiting from before."""

    connected = True

    def __init__(self, pending: int = 0, stalled: bool = False) -> None:
        self.queued: list = []
        self.pending, self.stalled = pending, stalled

    @property
    def pending_out(self) -> int:
        return self.pending + (len(self.queued) if self.stalled else 0)

    def packet_out(self, packet) -> None:
        self.queued.append(packet)


def _handler_with_sessions(pending: dict[str, int] | None = None, stalled: bool = False,
                           unprogrammed: set[str] = frozenset()):
    controller = FabricController(fat_tree(4), Pipeline.from_build_dir(), connect_timeout=0.2)
    handler = FailureHandler(controller, HeartbeatConfig())
    sessions = {}
    for name, agent in controller.agents.items():
        agent.conn = sessions[name] = _Session((pending or {}).get(name, 0), stalled)
        agent.programmed_on = None if name in unprogrammed else agent.conn
    return handler, sessions


def _fabric_ports(handler, switch: str) -> int:
    return sum(1 for name, _ in handler.monitor.ports if name == switch)


def test_every_programmed_session_gets_one_heartbeat_per_fabric_port_a_round():
    handler, sessions = _handler_with_sessions()
    handler._send_all()
    handler._send_all()
    for name, session in sessions.items():
        assert len(session.queued) == 2 * _fabric_ports(handler, name), name
    assert handler.heartbeats_held_back == 0


def test_a_round_still_queued_holds_the_next_back_and_counts_it():
    handler, sessions = _handler_with_sessions(stalled=True)     # streams that take nothing
    handler._send_all()
    handler._send_all()
    for name, session in sessions.items():
        assert len(session.queued) == _fabric_ports(handler, name), name     # the first round only
    assert handler.heartbeats_held_back == len(handler.monitor.ports)
    # c0's stream still holds a whole round from before: its round is left out, counted
    c0 = _fabric_ports(handler, "c0")
    handler, sessions = _handler_with_sessions({"c0": c0})
    handler._send_all()
    assert sessions["c0"].queued == [] and handler.heartbeats_held_back == c0
    assert len(sessions["c1"].queued) == _fabric_ports(handler, "c1")
    # one short of a round: sent
    handler, sessions = _handler_with_sessions({"c0": c0 - 1})
    handler._send_all()
    assert len(sessions["c0"].queued) == c0 and handler.heartbeats_held_back == 0


def test_a_session_not_programmed_yet_gets_no_heartbeats():
    handler, sessions = _handler_with_sessions(unprogrammed={"p1a0"})
    handler._send_all()
    assert sessions["p1a0"].queued == [] and handler.heartbeats_held_back == 0
    assert len(sessions["p1a1"].queued) == _fabric_ports(handler, "p1a1")
