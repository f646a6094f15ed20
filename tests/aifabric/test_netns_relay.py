"""A named lab's --web and --metrics reached from the machine's namespace (aifabric.lab.netns_relay):
an HTTP server in a namespace of its own, unreachable from the machine's until the relay listens
on its address here; a connection the lab does not take is closed and counted."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from aifabric.cli import _relayed
from aifabric.lab.netns_relay import Relay
from emulation.testbed import free_tcp_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")
MARK = "served inside the lab's namespace"


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


@pytest.fixture
def lab_netns():
    name = f"aifabric-relay{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False)


def test_the_relay_carries_connections_into_the_lab_and_closes_those_it_cannot(lab_netns, tmp_path):
    (tmp_path / "index.html").write_text(MARK)
    port = free_tcp_port()
    server = subprocess.Popen(["ip", "netns", "exec", lab_netns, sys.executable, "-m", "http.server", "--bind",
                               "127.0.0.1", str(port), "--directory", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(["ip", "netns", "exec", lab_netns, sys.executable, "-c",
                              f"import socket; socket.create_connection(('127.0.0.1', {port}), 1)"],
                             capture_output=True).returncode:
            assert time.monotonic() < deadline and server.poll() is None, "the server inside did not start"
            time.sleep(0.1)
        with pytest.raises(OSError):            # the namespaces are apart: nothing serves it here
            _get(f"http://127.0.0.1:{port}/")
        relay = Relay("127.0.0.1", port, Path("/run/netns") / lab_netns).start()
        try:
            assert MARK in _get(f"http://127.0.0.1:{port}/")
            assert MARK in _get(f"http://127.0.0.1:{port}/index.html")
            assert relay.relayed == 2 and relay.refused == 0
            server.terminate()
            server.wait(timeout=10)
            with pytest.raises(OSError):        # the lab stopped serving: closed at once, counted
                _get(f"http://127.0.0.1:{port}/")
            assert relay.refused == 1
        finally:
            relay.close()
        with pytest.raises(OSError):            # and nothing listens here after close
            _get(f"http://127.0.0.1:{port}/")
    finally:
        server.kill()
        server.wait(timeout=10)


def test_the_relayed_addresses_are_the_web_and_metrics_ones_with_a_port(capsys):
    args = argparse.Namespace(web="8080", metrics="0.0.0.0:9100")
    assert _relayed(args) == [("127.0.0.1", 8080), ("0.0.0.0", 9100)]
    assert _relayed(argparse.Namespace(web="0", metrics=None)) == []
    assert "--web 0: a port chosen inside" in capsys.readouterr().err
    assert _relayed(argparse.Namespace(command="demo")) == []
