"""Which links and switches failed, from the ports the heartbeat monitor found dead.

A link is down when either of its ends is dead (a heartbeat lost in one direction is enough);
a switch has failed when every one of its links is down (its neighbours all lost it); the links
of a failed switch are reported through the switch, the others as links of their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from controller.topology import TopologyModel


@dataclass(frozen=True, order=True)
class Link:
    """A switch-switch link: ``a`` (the smaller name) out of ``a_port`` to ``b``'s ``b_port``."""

    a: str
    a_port: int
    b: str
    b_port: int

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"

    def ends(self) -> tuple[tuple[str, int], tuple[str, int]]:
        return (self.a, self.a_port), (self.b, self.b_port)


@dataclass(frozen=True, order=True)
class Failure:
    """``kind`` "link" (``name`` a-b) or "switch" (``name`` the switch); ``links``: the links
    it took down."""

    kind: str
    name: str
    links: tuple[str, ...]


def fabric_links(model: TopologyModel) -> list[Link]:
    """Every switch-switch link of the fabric, up or down."""
    switches = {sw.name for sw in model.switches}
    links = []
    for a, b, data in model.graph.edges(data=True):
        if a in switches and b in switches:
            a, b = sorted((a, b))
            links.append(Link(a, data["ports"][a], b, data["ports"][b]))
    return sorted(links)


def down_links(links: Iterable[Link], dead_ports: set[tuple[str, int]]) -> list[Link]:
    return [link for link in links if any(end in dead_ports for end in link.ends())]


def localise(links: Iterable[Link], down: Iterable[Link]) -> list[Failure]:
    """Failed switches (all their links down) and the remaining down links, sorted."""
    links, down = list(links), set(down)
    per_switch: dict[str, list[Link]] = {}
    for link in links:
        per_switch.setdefault(link.a, []).append(link)
        per_switch.setdefault(link.b, []).append(link)
    failures = []
    explained: set[Link] = set()
    for switch, own in sorted(per_switch.items()):
        if len(own) > 1 and all(link in down for link in own):
            failures.append(Failure("switch", switch, tuple(sorted(link.name for link in own))))
            explained |= set(own)
    failures += [Failure("link", link.name, (link.name,)) for link in sorted(down - explained)]
    return sorted(failures)
