"""The live page of a running `Lab` (``aifabric up --web``): `controller.web` with changes that
reach the fabric itself.

`LabChanges` fails and restores links through `aifabric.lab.failures.Failures` (the same
injector the control socket uses, so the page shows what either took down) and sets
load-balancing modes through the controller (`controller.web.changes.ControllerChanges`).
`parse_web_address` reads ``--web``'s value for ``aifabric up`` and ``aifabric controller``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from controller.web.changes import ChangeError, ControllerChanges
from controller.web.loads import LinkRates
from controller.web.server import WebServer, page_for
from softswitch.addr import parse_host_port

if TYPE_CHECKING:
    from aifabric.lab.failures import Failures
    from aifabric.lab.lab import Lab


def parse_web_address(text: str) -> tuple[str, int]:
    """HOST:PORT, or PORT alone on 127.0.0.1 (0: any free port); ValueError naming the text."""
    if text.isascii() and text.isdigit():
        text = f"127.0.0.1:{text}"
    return parse_host_port(text, allow_port_zero=True)


class LabChanges(ControllerChanges):
    """Links failed and restored in the lab itself; modes through its controller."""

    def __init__(self, lab: "Lab", failures: "Failures") -> None:
        super().__init__(lab.controller)
        self.failures = failures

    def fail_link(self, a: str, b: str) -> dict:
        if frozenset((a, b)) in self.failures.down_links:
            raise ChangeError(409, f"link {a}-{b} is down already (taken down here or by `aifabric fail`)")
        return self.failures.fail_link(a, b).to_dict()

    def restore_link(self, a: str, b: str) -> dict:
        if frozenset((a, b)) not in self.failures.down_links:
            raise ChangeError(409, f"link {a}-{b} was not taken down: nothing to restore")
        return self.failures.restore_link(a, b).to_dict()

    def injected(self) -> dict[str, list]:
        return {"links": sorted(sorted(pair) for pair in self.failures.down_links),
                "switches": sorted(self.failures.down_switches)}


def lab_page(lab: "Lab", failures: "Failures", host: str = "127.0.0.1", port: int = 0,
             rates: LinkRates | None = None) -> WebServer:
    """The page of ``lab`` (not started): loads, INT (when the lab runs it), the links PFC holds
    paused (when it runs traffic classes), changes."""
    if lab.controller is None:
        raise ValueError("the live page needs our controller (aifabric up --controller aifabric)")
    classes = lab.lossless.poller if getattr(lab, "lossless", None) is not None else None
    return page_for(lab.controller, host=host, port=port, int_collector=lab.collector,
                    changes=LabChanges(lab, failures), rates=rates, classes=classes)
