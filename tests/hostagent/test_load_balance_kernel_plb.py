"""The kernel's PLB as the benchmark's `kernel-plb` peer (hostagent/load_balance_kernel_plb.py): what a kernel
lacks is named, the settings land in a real network namespace (and nowhere else), the kernel's
repath counter is read, and the benchmark skips the mode, saying why, where DCTCP is missing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyroute2 import netns

from aifabric.cli.load_balance_cli import unavailable_modes
from hostagent import load_balance_kernel_plb as kernel_plb
from hostagent.agent.load_balance_plb import PlbParams
from hostagent.traffic.flows import FlowSpec

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")
needs_plb = pytest.mark.skipif(not (kernel_plb.SYSCTL_DIR / "tcp_plb_enabled").exists(),
                               reason="this kernel has no net.ipv4.tcp_plb_* sysctls")


class Ns:
    """A network namespace to run shell commands in, as a Mininet host's ``cmd``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def cmd(self, command: str) -> str:
        return subprocess.run(["ip", "netns", "exec", self.name, "sh", "-c", command],
                              capture_output=True, text=True).stdout


@pytest.fixture
def ns():
    name = "aifkplb"
    if name in netns.listnetns():
        netns.remove(name)
    netns.create(name)
    try:
        yield Ns(name)
    finally:
        netns.remove(name)


def _read(host: Ns, key: str) -> str:
    return host.cmd(f"sysctl -n {key}").strip()


def test_unavailable_names_what_the_kernel_lacks(tmp_path):
    assert "no net.ipv4.tcp_plb_enabled" in kernel_plb.unavailable(tmp_path)
    (tmp_path / "tcp_plb_enabled").write_text("0\n")
    (tmp_path / "tcp_available_congestion_control").write_text("reno bbr cubic\n")
    why = kernel_plb.unavailable(tmp_path)
    assert "DCTCP is not available" in why and "reno bbr cubic" in why
    (tmp_path / "tcp_available_congestion_control").write_text("reno cubic dctcp\n")
    assert kernel_plb.unavailable(tmp_path) is None


@needs_plb
def test_every_setting_is_a_sysctl_of_this_kernel():
    for key in kernel_plb.sysctls(PlbParams()):
        assert Path("/proc/sys", *key.split(".")).exists(), key


@needs_root
@needs_plb
def test_enable_sets_the_namespace_only_and_names_a_setting_that_fails(ns):
    host_before = Path("/proc/sys/net/ipv4/tcp_plb_rehash_rounds").read_text()
    params = PlbParams(rehash_rounds=5, idle_rehash_rounds=2, cong_thresh=64, suspend_rto_sec=7)
    if kernel_plb.unavailable() is None:
        kernel_plb.enable(ns, params)
        assert _read(ns, "net.ipv4.tcp_congestion_control") == "dctcp"
    else:   # no DCTCP: PLB's own settings are in, then the congestion control is refused by name
        with pytest.raises(RuntimeError, match="tcp_congestion_control=dctcp"):
            kernel_plb.enable(ns, params)
    assert [_read(ns, f"net.ipv4.tcp_plb_{k}") for k in ("rehash_rounds", "idle_rehash_rounds", "cong_thresh",
                                                          "suspend_rto_sec", "enabled")] == ["5", "2", "64", "7", "1"]
    assert Path("/proc/sys/net/ipv4/tcp_plb_rehash_rounds").read_text() == host_before
    kernel_plb.disable(ns)
    assert _read(ns, "net.ipv4.tcp_plb_enabled") == "0"
    assert kernel_plb.rehashes(ns) == 0          # the kernel's own counter, in a namespace nothing ran in


def test_the_same_flows_as_tcp_streams():
    udp = [FlowSpec("a", "b", "udp", 40001, 4791, 400, start=0.5, payload=1458, rate_pps=100)]
    (tcp,) = kernel_plb.as_tcp(udp)
    assert (tcp.protocol, tcp.src, tcp.dst, tcp.sport, tcp.dport, tcp.start) == ("tcp", "a", "b", 40001, 4791, 0.5)
    assert tcp.bytes == udp[0].bytes == 400 * 1458


@pytest.mark.skipif(kernel_plb.unavailable() is None, reason="this kernel can run its PLB: the mode would run")
def test_the_benchmark_skips_kernel_plb_saying_why(tmp_path):
    assert unavailable_modes(["ecmp", "kernel-plb"]) == {"kernel-plb": kernel_plb.unavailable()}
    aifabric = str(Path(sys.executable).parent / "aifabric")
    res = subprocess.run([aifabric, "bench", "lb", "--modes", "kernel-plb", "--json", str(tmp_path / "lb.json"),
                          "--png", str(tmp_path / "lb.png")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"skipping mode kernel-plb: {kernel_plb.unavailable()}" in res.stdout
    assert "no mode left to run" in res.stdout and "starting" not in res.stderr   # no fabric was brought up
