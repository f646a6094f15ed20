"""The lab's nftables table (emulation.control_ports): a closed port refuses connections from
another machine (a network namespace on a veth link, `exposure.outside_namespace`) over IPv4
and IPv6 and still accepts them from this machine; reopened, it is reachable again; a closed
port nothing listens on is found and reopened by `prune`, and `cleanup` does it."""
from __future__ import annotations

import os
import shutil
import socket

import pytest

from exposure import HERE4, outside_namespace, probe_from, wildcard_listener
from emulation import control_ports
from emulation.cleanup import cleanup, leftovers

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (nftables, network namespaces)"),
    pytest.mark.skipif(shutil.which("nft") is None and not os.path.exists("/usr/sbin/nft"),
                       reason="nft is not installed (apt-get install nftables, or make setup)"),
]


def _accepts_here(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def test_closed_port_refused_from_outside_and_open_here():
    with outside_namespace() as ns, wildcard_listener() as canary, wildcard_listener() as guarded:
        before = probe_from(ns, [canary, guarded])
        assert set(before.values()) == {"accepted"}, f"the probe reaches nothing, it cannot tell: {before}"
        control_ports.close([guarded])
        try:
            assert guarded in control_ports.closed()
            closed = probe_from(ns, [canary, guarded])
            assert closed[(4, guarded)] == closed[(6, guarded)] == "refused", closed
            assert closed[(4, canary)] == closed[(6, canary)] == "accepted", f"other ports are touched: {closed}"
            for host in ("127.0.0.1", "::1", HERE4):     # this machine, whichever of its addresses
                assert _accepts_here(host, guarded), f"port {guarded} closed to this machine too ({host})"
        finally:
            control_ports.reopen([guarded])
        assert guarded not in control_ports.closed()
        assert set(probe_from(ns, [guarded]).values()) == {"accepted"}


def test_closed_port_nothing_listens_on_is_stale_and_cleanup_reopens_it():
    with wildcard_listener() as port:
        pass                                     # a port that was free a moment ago, now unused
    control_ports.close([port])
    try:
        assert port in control_ports.stale()
        assert port in leftovers().closed_ports, "leftovers() misses a stale rule"
        report = cleanup(nodes=["no-such-node"], ports=[port])
        assert port not in control_ports.closed(), f"cleanup left the rule for {port}: {report}"
    finally:
        control_ports.reopen([port])
