"""The hosts' eBPF agents (hostagent.agent: PLB, DCQCN) for one run of ranks on a fabric, and the
transport settings the ranks then need: their collectives carried RoCEv2-like
(hostagent.collectives.rocev2), the only UDP the agents act on, with the agents' rate-control port
when DCQCN sets rates. Every rank binds its host's port 4791, so one rank a host."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from aifabric.lab.lab import Lab
from hostagent.agent.config import AgentConfig
from hostagent.agent.launch import AgentSet, start_agents


def rocev2_settings(host_agent: AgentConfig, hosts: Sequence[str]) -> dict:
    """{"rocev2": True, "rate_control_port": port or 0} for ranks on ``hosts`` (in rank order)."""
    shared = sorted({h for h in hosts if list(hosts).count(h) > 1})
    if shared:
        raise ValueError(f"host agents: the ranks' RoCEv2 transport takes one rank a host, and "
                         f"{', '.join(shared)} hold more")
    return {"rocev2": True, "rate_control_port": host_agent.rate_control_port if "dcqcn" in host_agent.mode else 0}


def rank_args(host_agent: AgentConfig | None, hosts: Sequence[str]) -> list[str]:
    """The same as command-line options of a rank program (hostagent.collectives.rank_program)."""
    if host_agent is None:
        return []
    port = rocev2_settings(host_agent, hosts)["rate_control_port"]
    return ["--rocev2", *(["--rate-control-port", str(port)] if port else [])]


@contextmanager
def agents_on(lab: Lab, hosts: Sequence[str], host_agent: AgentConfig | None, run_dir: str | Path) -> Iterator[AgentSet | None]:
    """The agents on ``hosts`` while the block runs (None without ``host_agent``); stopped after,
    so their counters (`AgentSet.totals`) are final once it ends."""
    if host_agent is None:
        yield None
        return
    with start_agents({h: lab.host(h) for h in dict.fromkeys(hosts)}, host_agent, Path(run_dir)) as agents:
        yield agents
