"""Failure handling: heartbeats between neighbouring switches, data-plane failover, reroute,
repair and localisation (issue: failures).

Use::

    from controller.failover import FailureHandler, HeartbeatConfig
    handler = FailureHandler(controller, HeartbeatConfig(interval_ms=10, multiplier=3)).start()
    # or: handler = start_failure_handling(controller, HeartbeatConfig(...))   (the running one if any)
    # or: Lab(fabric, failover=HeartbeatConfig(...)) -> lab.failure_handler
    running_handler(controller)          # the handler running on a controller, or None
    handler.port_alive("p0a0", 3); handler.link_up("p0a0", "c0"); handler.failures()
    handler.events, handler.reroutes     # what happened, with times (time.monotonic())
    handler.stop()                       # or controller.close()

How it works: `controller.failover.handler`; the P4 side: ``p4src/include/control/failover.p4``
and ``packetio.p4`` (p4src/README.md, "Failures"). Modules: `config` (HeartbeatConfig),
`heartbeat` (frames), `monitor` (per-port state machine), `localise` (which link or switch
failed), `entries` (P4Runtime entities), `metrics` (Prometheus), `handler` (the threads).
"""

from controller.failover.config import HeartbeatConfig
from controller.failover.handler import FailureHandler, PortEvent, Reroute, running_handler, start_failure_handling
from controller.failover.localise import Failure, Link

__all__ = ["Failure", "FailureHandler", "HeartbeatConfig", "Link", "PortEvent", "Reroute", "running_handler",
           "start_failure_handling"]
