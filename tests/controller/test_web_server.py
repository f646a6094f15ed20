"""The live page's server (controller.web.server) over real HTTP: the page and its library, the
state and its event stream (at least one update a second), and changes: refused without the
token or with a wrong one, bad requests answered with a 4xx naming what was wrong, good ones
carried out; a read-only server and the controller-only changes refuse what they cannot do."""
from __future__ import annotations

import json
import time
import urllib.request

import pytest

from controller.fabric_controller import FabricController, Pipeline
from controller.web.changes import ControllerChanges
from controller.web.server import WebServer
from controller.web.state import FabricView
from tests.web_page_support import http_get, http_post
from topologies.fabric import fat_tree


class Recorded:
    """Changes that only record what they were asked (the server's checks are under test)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def fail_link(self, a, b):
        self.calls.append(("fail", a, b))
        return {"target": f"{a}-{b}"}

    def restore_link(self, a, b):
        self.calls.append(("restore", a, b))
        return {"target": f"{a}-{b}"}

    def set_lb_mode(self, mode, switches, gap_us):
        self.calls.append(("lb", mode, switches, gap_us))
        return {"mode": mode}

    def injected(self):
        return {"links": [], "switches": []}


@pytest.fixture(scope="module")
def controller():
    ctl = FabricController(fat_tree(4), Pipeline.from_build_dir(), connect_timeout=0.2)
    yield ctl
    ctl.close()


@pytest.fixture(scope="module")
def served(controller):
    changes = Recorded()
    server = WebServer(FabricView(controller), changes, interval=0.2)
    server.start()
    yield server, changes
    server.stop()


def test_the_page_its_library_and_the_topology_are_served(served):
    server, _ = served
    status, body, _ = http_get(server.url)
    assert status == 200 and b'src="/vendor/cytoscape.min.js"' in body and b"/static/app.js" in body
    status, body, kind = http_get(server.url + "vendor/cytoscape.min.js")
    assert status == 200 and b"cytoscape" in body[:2000] and len(body) > 100_000, "run `make setup` (npm ci)"
    status, body, _ = http_get(server.url + "static/app.js")
    assert status == 200 and b"EventSource" in body
    status, body, _ = http_get(server.url + "api/topology")
    topo = json.loads(body)
    assert status == 200 and topo["changes"] is True and len(topo["nodes"]) == 36 and len(topo["directions"]) == 96


def test_the_event_stream_sends_the_state_at_least_once_a_second(served):
    server, _ = served
    with urllib.request.urlopen(server.url + "api/events", timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        assert r.readline() == b"retry: 1000\n"
        seqs, t0 = [], time.monotonic()
        while time.monotonic() - t0 < 2.0:
            line = r.readline()
            if line.startswith(b"data: "):
                seqs.append(json.loads(line[6:])["seq"])
    assert len(seqs) >= 3 and seqs == sorted(set(seqs)), seqs
    status, body, _ = http_get(server.url + "api/state")
    assert status == 200 and json.loads(body)["seq"] >= seqs[-1]


def test_a_change_without_the_token_or_with_a_wrong_one_is_refused(served):
    server, changes = served
    url = server.url + "api/change/fail-link"
    status, body = http_post(url, {"a": "c0", "b": "p0a0"})
    assert status == 401 and "no token" in body["error"]
    status, body = http_post(url, {"a": "c0", "b": "p0a0"}, token="")         # "Bearer " and nothing
    assert status == 401 and "no token" in body["error"]
    status, body = http_post(url, {"a": "c0", "b": "p0a0"}, token=server.token[:-1] + "x")
    assert status == 403 and "wrong token" in body["error"]
    assert changes.calls == []


def test_bad_requests_get_a_4xx_naming_what_was_wrong(served):
    server, changes = served
    base, tok = server.url + "api/change/", server.token
    cases = [
        (base + "fail-link", {"a": "c0"}, 400, "field 'b' is missing"),
        (base + "fail-link", {"a": "c0", "b": 3}, 400, "field 'b': expected str, got int"),
        (base + "fail-link", {"a": "c0", "b": "p0a0", "why": 1}, 400, "unknown field(s) why"),
        (base + "fail-link", ["c0", "p0a0"], 400, "expected a JSON object"),
        (base + "fail-link", {"a": "c9", "b": "p0a0"}, 404, "no node named 'c9'"),
        (base + "fail-link", {"a": "c0", "b": "p1e0"}, 404, "no link between c0 and p1e0"),
        (base + "lb-mode", {"mode": "random"}, 400, "'random' is not one of ecmp, spray, flowlet"),
        (base + "lb-mode", {"mode": "spray", "switches": ["p9a9"]}, 404, "no switch named 'p9a9'"),
        (base + "reboot", {}, 404, "no change named 'reboot'"),
    ]
    for url, body, status, text in cases:
        got, answer = http_post(url, body, token=tok)
        assert (got, text in answer["error"]) == (status, True), (url, body, got, answer)
    got, answer = http_post(base + "fail-link", None, token=tok, raw=b"{not json")
    assert got == 400 and "not JSON" in answer["error"]
    got, answer = http_post(base + "fail-link", None, token=tok, raw=b"{" + b" " * 5000 + b"}")
    assert got == 413 and "larger than" in answer["error"]
    got, answer, _ = http_get(base + "fail-link")
    assert got == 405 and "method not allowed" in json.loads(answer)["error"]
    assert changes.calls == []


def test_good_requests_with_the_token_are_carried_out(served):
    server, changes = served
    base, tok = server.url + "api/change/", server.token
    assert http_post(base + "fail-link", {"a": "c0", "b": "p0a0"}, token=tok) == (200, {"done": "fail-link", "target": "c0-p0a0"})
    assert http_post(base + "restore-link", {"a": "p0a0", "b": "c0"}, token=tok)[0] == 200
    assert http_post(base + "lb-mode", {"mode": "flowlet", "switches": ["p0a0"], "gap_us": 200}, token=tok)[0] == 200
    assert changes.calls == [("fail", "c0", "p0a0"), ("restore", "p0a0", "c0"), ("lb", "flowlet", ["p0a0"], 200)]


def test_a_read_only_server_and_the_controller_alone_refuse_what_they_cannot_do(controller):
    view = FabricView(controller)
    read_only = WebServer(view, None)
    read_only.start()
    try:
        status, body = http_post(read_only.url + "api/change/lb-mode", {"mode": "spray"}, token=read_only.token)
        assert status == 403 and "read-only" in body["error"]
    finally:
        read_only.stop()
    alone = WebServer(view, ControllerChanges(controller))
    alone.start()
    try:
        status, body = http_post(alone.url + "api/change/fail-link", {"a": "c0", "b": "p0a0"}, token=alone.token)
        assert status == 409 and "aifabric fail link" in body["error"]
    finally:
        alone.stop()


def test_a_port_in_use_is_named():
    ctl = FabricController(fat_tree(4), Pipeline.from_build_dir())
    first = WebServer(FabricView(ctl))
    host, port = first.start()
    try:
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            WebServer(FabricView(ctl), port=port).start()
    finally:
        first.stop()
        ctl.close()
