"""`aifabric controller --fabric FILE --web ADDR`: the controller service serves the live page.

Three in-process softswitches (no ports: no root, no fabric) stand for a leaf-spine's switches;
the page's state shows them programmed; with the token the service logs, a load-balancing mode
is set on a switch (and answered only once the switch took it); a link change is refused with a
409 naming why (the links are the fabric side's), and a change without the token with a 401.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from aifabric.lab.description import FabricDescription
from emulation.testbed import free_tcp_port
from tests.p4rt_support import running_switch
from tests.web_page_support import http_post
from topologies.fabric import leaf_spine

NAMES = ["l0", "l1", "s0"]


def _token(proc: subprocess.Popen, timeout: float = 60.0) -> tuple[str, str]:
    """(page URL, token) from the service's log."""
    deadline, seen = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            seen += proc.stdout.readline()
            found = re.search(r"live page on (\S+)\s.*?the token (\S+)", seen, re.S)
            if found:
                return found.group(1), found.group(2)
        if proc.poll() is not None:
            break
    raise AssertionError(f"no page address and token in the service's log: {seen!r}")


def _state(url: str) -> dict:
    with urllib.request.urlopen(url + "api/state", timeout=5) as r:
        return json.loads(r.read())


def test_the_controller_service_serves_the_page_and_sets_modes_with_the_token(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        addrs = {n: stack.enter_context(running_switch(device_id=i + 1))[1] for i, n in enumerate(NAMES)}
        desc = FabricDescription.from_fabric(leaf_spine(2, 1, 1))
        desc.switches = [dataclasses.replace(sw, p4runtime_address=addrs[sw.name]) for sw in desc.switches]
        fabric_file = desc.write(tmp_path / "fabric.json")
        proc = subprocess.Popen([sys.executable, "-m", "aifabric.cli", "controller", "--fabric", str(fabric_file),
                                 "--web", f"127.0.0.1:{free_tcp_port()}"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        stack.callback(lambda: proc.poll() is None and proc.kill())
        url, token = _token(proc)
        deadline = time.monotonic() + 30
        while not all(s["in_sync"] for s in _state(url)["switches"].values()):
            assert time.monotonic() < deadline, _state(url)["switches"]
            time.sleep(0.2)
        change = url + "api/change/"
        assert http_post(change + "lb-mode", {"mode": "spray", "switches": ["l0"]}, None, timeout=30)[0] == 401
        assert http_post(change + "lb-mode", {"mode": "spray", "switches": ["l0"]}, token, timeout=30) == \
            (200, {"done": "lb-mode", "mode": "spray", "switches": ["l0"], "gap_us": None})
        deadline, want = time.monotonic() + 5, {"l0": "spray", "l1": "ecmp", "s0": "ecmp"}
        while (modes := {n: s["lb_mode"] for n, s in _state(url)["switches"].items()}) != want:
            assert time.monotonic() < deadline, modes        # the state is published every 0.5 s
            time.sleep(0.1)
        status, body = http_post(change + "fail-link", {"a": "l0", "b": "s0"}, token, timeout=30)
        assert status == 409 and "fabric's side" in body["error"]
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
