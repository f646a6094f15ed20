"""Driving the traffic tools in hosts: receivers first, then one sender per source host, then
one `FlowResult` per flow.

``hosts`` maps host names (those the flows use) to objects with ``.popen(argv, **kwargs)``
returning a ``subprocess.Popen`` with stdout and stderr piped, run in the host's network
namespace (Mininet nodes: `Lab.host(name)`), and, unless ``addr_of`` says otherwise, ``.IP()``
for the host's address::

    flows = patterns.permutation(names, seed=1, rate_pps=200)
    hosts = {n: lab.host(n) for n in names}
    results = run_traffic(hosts, flows)          # or the three steps below
    receivers = start_receivers(hosts, flows)
    senders = start_senders(hosts, flows)
    results = collect(flows, senders, receivers)

Flow ids are the flows' indices in ``flows``. Every sender starts its flows at one common
CLOCK_REALTIME instant (``start_delay`` seconds after `start_senders` is called), so the flows
of all hosts start together whatever the time each process took to start.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from hostagent.congestion import CcSettings
from hostagent.traffic.flows import FlowSpec, WireFlow
from hostagent.traffic.flowstats import TcpReceived, UdpReceived
from hostagent.traffic.helper_procs import json_result as _json_result
from hostagent.traffic.helper_procs import stop as stop_process
from hostagent.traffic.receiver import Received
from hostagent.traffic.sender import Sent, SentFlow

READY = b"ready\n"
MAX_ARG_BYTES = 120_000          # one argv string may hold 128 KiB (MAX_ARG_STRLEN)


@dataclass
class ProcessHandle:
    """One traffic process in a host and the indices of the flows it sends or receives."""

    host: str
    proc: subprocess.Popen
    flows: list[int]


@dataclass
class FlowResult:
    """One flow: what its sender said it sent and what its receiver counted (None: no record),
    and how late its sender process was for the common start (its flows kept their offsets
    from when it could begin)."""

    id: int
    flow: FlowSpec
    sent: SentFlow | None
    received: UdpReceived | TcpReceived | None
    sender_late_s: float = 0.0

    @property
    def complete(self) -> bool:
        """Every datagram (UDP) or byte (TCP) arrived."""
        return self.received is not None and self.received.complete

    @property
    def delivered_bytes(self) -> int:
        """Payload bytes that arrived (UDP: distinct datagrams only)."""
        if self.received is None:
            return 0
        if isinstance(self.received, UdpReceived):
            return self.received.unique * self.flow.payload
        return self.received.bytes

    @property
    def fct_s(self) -> float | None:
        """Flow completion time: UDP, first send to last arrival (of a complete flow); TCP, connect
        to the receiver's answer, as the sender timed it. None when the flow did not complete."""
        if not self.complete:
            return None
        if self.flow.protocol == "tcp" and self.sent is not None and self.sent.fct_s is not None:
            return self.sent.fct_s
        return self.received.fct_s

    @property
    def out_of_order(self) -> int | None:
        """UDP: datagrams that arrived below the highest sequence number seen; TCP: segments the
        receiving kernel got out of order. None when nothing arrived (or the kernel cannot say)."""
        return None if self.received is None else self.received.out_of_order

    @property
    def lost(self) -> int:
        """UDP datagrams that never arrived; TCP: stream bytes that never arrived."""
        if isinstance(self.received, UdpReceived):
            return self.received.lost
        return self.flow.size - (self.received.bytes if self.received is not None else 0)

    @property
    def throughput_bps(self) -> float | None:
        """Delivered payload bits per second over the flow completion time."""
        fct = self.fct_s
        return self.delivered_bytes * 8 / fct if fct else None

    def summary(self) -> dict:
        """A flat dict for JSON reports."""
        f = self.flow
        return {"id": self.id, "src": f.src, "dst": f.dst, "protocol": f.protocol, "sport": f.sport,
                "dport": f.dport, "size": f.size, "bytes": f.bytes, "start": f.start, "complete": self.complete,
                "delivered_bytes": self.delivered_bytes, "fct_s": self.fct_s, "out_of_order": self.out_of_order,
                "lost": self.lost, "throughput_bps": self.throughput_bps, "sender_late_s": self.sender_late_s,
                "paused_s": self.sent.paused_s if self.sent is not None else 0.0,
                "error": self.sent.error if self.sent is not None else "no sender record", **self._cc_summary()}

    def _cc_summary(self) -> dict:
        s = self.sent
        if s is None or s.cc is None:
            return {}
        return {"cc": s.cc, "acks": s.acks, "acks_missing": s.acks_missing, "acks_late": s.acks_late,
                "rtt_min_us": s.rtt_min_us,
                "rtt_mean_us": round(s.rtt_sum_us / s.acks, 1) if s.acks else None,
                "window_wait_s": round(s.window_wait_s, 3)}


def _check_flows(hosts: Mapping[str, object], flows: Sequence[FlowSpec]) -> None:
    missing = sorted({n for f in flows for n in (f.src, f.dst)} - set(hosts))
    if missing:
        raise ValueError(f"flows name hosts that are not given: {missing}")
    seen: dict[tuple[str, str, int], int] = {}
    for i, f in enumerate(flows):
        key = (f.src, f.protocol, f.sport)
        if key in seen:
            raise ValueError(f"flows {seen[key]} and {i} both use {f.protocol} source port {f.sport} on {f.src}")
        seen[key] = i


def _by_host(flows: Sequence[FlowSpec], end: str) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, f in enumerate(flows):
        groups.setdefault(getattr(f, end), []).append(i)
    return groups


def _traffic_cmd(python: str, *args: object) -> list[str]:
    return [python, "-u", "-m", "hostagent.traffic", *map(str, args)]


def _wait_ready(handle: ProcessHandle, deadline: float) -> None:
    """Read exactly the ``ready`` line (no further, so the JSON that follows stays in the pipe)."""
    fd = handle.proc.stdout.fileno()
    got = b""
    while len(got) < len(READY) and READY.startswith(got):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise RuntimeError(f"traffic receiver on {handle.host} not ready in time")
        chunk = os.read(fd, len(READY) - len(got))
        if not chunk:
            break
        got += chunk
    if got != READY:
        if handle.proc.poll() is None:
            handle.proc.kill()
        handle.proc.wait(timeout=5)
        err = handle.proc.stderr.read().decode(errors="replace").strip()
        raise RuntimeError(f"traffic receiver on {handle.host} did not start: {err[-500:] or got!r}")


def start_receivers(hosts: Mapping[str, object], flows: Sequence[FlowSpec], *, quiet: float = 2.0,
                    deadline: float = 60.0, reorder_buffer: bool = False, python: str = sys.executable,
                    ready_timeout: float = 30.0) -> list[ProcessHandle]:
    """One receiver on every destination host of ``flows``, on the ports its flows use, expecting
    their number; returns once every one is listening. A receiver ends when all its flows are
    complete, ``quiet`` s after its last packet once all began, or after ``deadline`` s."""
    _check_flows(hosts, flows)
    handles: list[ProcessHandle] = []
    try:
        for host, ids in _by_host(flows, "dst").items():
            args: list[object] = ["receive", "--quiet", quiet, "--deadline", deadline, "--expect", len(ids)]
            for proto in ("udp", "tcp"):
                for port in sorted({flows[i].dport for i in ids if flows[i].protocol == proto}):
                    args += [f"--{proto}-port", port]
            if reorder_buffer:
                args.append("--reorder-buffer")
            handles.append(ProcessHandle(host, hosts[host].popen(_traffic_cmd(python, *args)), ids))
        limit = time.monotonic() + ready_timeout
        for h in handles:
            _wait_ready(h, limit)
    except BaseException:
        stop(handles)
        raise
    return handles


def start_senders(hosts: Mapping[str, object], flows: Sequence[FlowSpec], *, start_delay: float = 1.0,
                  addr_of: Callable[[str], str] | None = None, python: str = sys.executable,
                  tcp_timeout: float = 30.0, swap_every: int = 0, drop_every: int = 0,
                  rate_control_port: int = 0, pause: Mapping[str, str] | None = None,
                  cc: CcSettings | None = None) -> list[ProcessHandle]:
    """One sender on every source host of ``flows``; all flows' ``start`` offsets count from
    ``start_delay`` s from now. ``addr_of(host name)`` gives a destination's address (default:
    the host's ``.IP()``). ``swap_every``/``drop_every``/``rate_control_port`` (a host agent's
    DCQCN sets the UDP rates), ``pause`` (host -> its PFC state, hostagent.lossless: paused classes
    held), ``cc`` (the UDP flows' congestion control): see `hostagent.traffic.sender`."""
    _check_flows(hosts, flows)
    addr = addr_of or (lambda name: hosts[name].IP())
    start_at = time.time() + start_delay
    handles: list[ProcessHandle] = []
    try:
        for host, ids in _by_host(flows, "src").items():
            text = json.dumps([WireFlow(i, addr(flows[i].dst), flows[i]).to_dict() for i in ids],
                              separators=(",", ":"))
            if len(text) > MAX_ARG_BYTES:
                raise ValueError(f"{host} sends {len(ids)} flows: {len(text)} bytes of JSON, more than one "
                                 f"argument holds ({MAX_ARG_BYTES}); split the run")
            args = ["send", "--flows", text, "--start-at", repr(start_at), "--tcp-timeout", tcp_timeout,
                    "--swap-every", swap_every, "--drop-every", drop_every, "--rate-control-port", rate_control_port]
            if pause and host in pause:
                args += ["--pause", pause[host]]
            if cc is not None:
                args += ["--cc", cc.to_arg()]
            handles.append(ProcessHandle(host, hosts[host].popen(_traffic_cmd(python, *args)), ids))
    except BaseException:
        stop(handles)
        raise
    return handles


def collect(flows: Sequence[FlowSpec], senders: Sequence[ProcessHandle],
            receivers: Sequence[ProcessHandle], timeout: float | None = None) -> list[FlowResult]:
    """Wait for every sender and receiver to finish and pair their records, one `FlowResult` per
    flow in the order of ``flows``. A process that printed no report raises RuntimeError (the
    others are stopped first); so do senders still sending ``timeout`` s from now (a congestion
    control can slow a flow to a datagram every thousand RTTs: a caller may not wait for that)."""
    sent: dict[int, SentFlow] = {}
    late: dict[int, float] = {}
    received: dict[int, UdpReceived | TcpReceived] = {}
    try:
        if timeout is not None:
            _wait_senders(senders, timeout)
        for h in senders:
            report = Sent.from_dict(_json_result(h.proc, f"traffic sender on {h.host}"))
            for rec in report.flows:
                sent[rec.id] = rec
                late[rec.id] = report.late_s
        for h in receivers:
            got = Received.from_dict(_json_result(h.proc, f"traffic receiver on {h.host}"))
            mine = set(h.flows)
            for rec in got.flows:
                if rec.flow_id not in mine or flows[rec.flow_id].sport != rec.sport:
                    continue                  # not one of this run's flows (a stray, a late packet)
                best = received.get(rec.flow_id)
                if best is None or _amount(rec) > _amount(best):
                    received[rec.flow_id] = rec
    finally:
        stop([*senders, *receivers])
    return [FlowResult(i, f, sent.get(i), received.get(i), late.get(i, 0.0)) for i, f in enumerate(flows)]


def _wait_senders(senders: Sequence[ProcessHandle], timeout: float) -> None:
    end = time.monotonic() + timeout
    for h in senders:
        try:
            h.proc.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            still = [s.host for s in senders if s.proc.poll() is None]
            raise RuntimeError(f"traffic senders on {', '.join(still)} still sending after {timeout:g} s: "
                               f"stopped") from None


def _amount(rec: UdpReceived | TcpReceived) -> int:
    return rec.unique if isinstance(rec, UdpReceived) else rec.bytes


def stop(handles: Sequence[ProcessHandle], timeout: float = 2.0) -> None:
    """Kill whatever of ``handles`` still runs and reap it (all killed first, then each reaped)."""
    for h in handles:
        if h.proc.poll() is None:
            h.proc.kill()
    for h in handles:
        stop_process(h.proc, timeout)


def run_traffic(hosts: Mapping[str, object], flows: Sequence[FlowSpec], *, quiet: float = 2.0,
                deadline: float = 60.0, reorder_buffer: bool = False, start_delay: float = 1.0,
                addr_of: Callable[[str], str] | None = None, python: str = sys.executable,
                tcp_timeout: float = 30.0, swap_every: int = 0, drop_every: int = 0,
                rate_control_port: int = 0, pause: Mapping[str, str] | None = None,
                cc: CcSettings | None = None, timeout: float | None = None) -> list[FlowResult]:
    """`start_receivers`, `start_senders` and `collect` (``timeout``: the senders') in one,
    stopping everything on an error."""
    receivers = start_receivers(hosts, flows, quiet=quiet, deadline=deadline, reorder_buffer=reorder_buffer,
                                python=python)
    try:
        senders = start_senders(hosts, flows, start_delay=start_delay, addr_of=addr_of, python=python,
                                tcp_timeout=tcp_timeout, swap_every=swap_every, drop_every=drop_every,
                                rate_control_port=rate_control_port, pause=pause, cc=cc)
    except BaseException:
        stop(receivers)
        raise
    return collect(flows, senders, receivers, timeout)
