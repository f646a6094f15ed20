"""The Docker stack (docker-compose.yml) run for real: build, up, a live fabric, Prometheus and
every Grafana panel's query, switches and hosts on the native paths the image carries prebuilt,
the live page the controller serves (over HTTP, its changes with and without the token it
logged, and drawn in a real browser where chromium is installed), the controller killed and
back, then down with nothing left.

Needs a Docker engine and docker-compose: where they are installed (scripts/bootstrap.sh installs
them) the test starts dockerd when it is not running and makes the debian:bookworm base image
when it is absent (`scripts/docker_engine.sh`); elsewhere it is skipped, saying why. The fabric
is a small leaf-spine (2 leaves, 2 spines, 2 hosts each) to keep the run short; Grafana itself
is started only where its image is present (no registry is reachable on the development
machines): its dashboards are checked by sending every panel's PromQL to the stack's Prometheus,
each of which must return data: a ring AllReduce among the hosts leaves its ranks' reports in
the run directory the controller serves them from, and UDP flows load the leaves' uplinks.
Where the engine cannot start privileged containers, the fabric runs with
docker/compose.unprivileged.yml (every capability the engine has, system paths writable).
On machines behind a TLS-inspecting proxy, the CA certificates in
/usr/local/share/ca-certificates are given to the image build for pip (AIFABRIC_PIP_CERT_PEM).

The stack runs Mininet in a privileged container: like every fabric, take the machine's fabric
lock around it (`flock /tmp/aifabric-fabric.lock pytest tests/fabric/test_docker_stack.py`).
"""
from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from aifabric.lab import traffic
from aifabric.lab.description import FabricDescription, load
from aifabric.containers.swarm import ContainerHost, build_env
from hostagent.collectives.report_files import RUN_SUBDIR
from tests.web_page_support import MISSING as BROWSER_MISSING, headless_chromium, http_get, http_post
from tests.docker_support import compose_leftovers, run, skip_reason
from emulation.testbed import free_tcp_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "docker" / "grafana" / "dashboards"
PROJECT = "aifabricstacktest"
TOPOLOGY = "--topo leafspine --leaves 2 --spines 2 --hosts-per-leaf 2"
GRAFANA_IMAGE = "grafana/grafana:10.4.2"
UP_TIMEOUT_S = 300          # first build of all images included
ALLREDUCE_TIMEOUT_S = 120
DATA_TIMEOUT_S = 90
HEALTHY_TIMEOUT_S = 120
CONTAINER_PYTHON = "python3"    # the fabric image's, with the project installed


@dataclass
class Stack:
    env: dict[str, str]
    services: list[str]
    prometheus: str             # base URL
    web: str                    # the live page's base URL
    run_dir: Path
    timings: dict[str, float]

    def compose(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        return run("docker-compose", "-p", PROJECT, *args, env=self.env, timeout=timeout, check=check)

    def container(self, service: str) -> str:
        return self.compose("ps", "-q", service).strip()

    def health(self, service: str) -> str:
        cid = self.container(service)
        if not cid:
            return "absent"
        state = json.loads(run("docker", "inspect", cid))[0]["State"]
        return state.get("Health", {}).get("Status", state["Status"])

    def description(self) -> FabricDescription:
        return load(self.run_dir / "fabric.json")

    def query(self, expr: str) -> list[dict]:
        url = f"{self.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - 127.0.0.1 only
            data = json.loads(answer.read())
        assert data["status"] == "success", data
        return data["data"]["result"]


def hosts(stack: Stack) -> list[ContainerHost]:
    """The fabric's hosts, entered in the fabric container by the process ids the description gives."""
    fabric = stack.container("fabric")
    return [ContainerHost(h.name, ["docker", "exec", fabric, "nsenter", "-t", str(h.pid), "-n"])
            for h in stack.description().hosts]


def all_pairs(stack: Stack) -> traffic.Reachability:
    desc = stack.description()
    addr = {h.name: h.ipv4.split("/")[0] for h in desc.hosts}
    return traffic.all_pairs_ping(hosts(stack), lambda h: addr[h.name], "ipv4")


def wait_until(what: str, check, timeout: float, interval: float = 1.0):
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (OSError, AssertionError, subprocess.SubprocessError) as err:
            last = err
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {timeout:g} s (last: {last!r})")


def _compose_env(run_dir: Path, prometheus_port: int, web_port: int) -> dict[str, str]:
    env = build_env(AIFABRIC_TOPOLOGY=TOPOLOGY, AIFABRIC_TARGET="softswitch",
               AIFABRIC_RUN_DIR=str(run_dir), AIFABRIC_PROMETHEUS_PORT=str(prometheus_port),
               AIFABRIC_GRAFANA_PORT=str(free_tcp_port()), AIFABRIC_WEB_PORT=str(web_port))
    if subprocess.run(["docker", "run", "--rm", "--privileged", "debian:bookworm", "true"],
                      capture_output=True).returncode != 0:
        # an engine that cannot grant every capability (a sandbox, some VMs)
        env["COMPOSE_FILE"] = "docker-compose.yml:docker/compose.unprivileged.yml"
    return env


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    run_dir = tmp_path_factory.mktemp("stack-run")
    port, web_port = free_tcp_port(), free_tcp_port()
    env = _compose_env(run_dir, port, web_port)
    services = ["fabric", "controller", "prometheus"]
    if subprocess.run(["docker", "image", "inspect", GRAFANA_IMAGE], capture_output=True).returncode == 0:
        services.append("grafana")
    st = Stack(env, services, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{web_port}", run_dir, {})
    st.compose("down", "--remove-orphans", check=False)      # an earlier run's leftovers
    try:
        t0 = time.monotonic()
        st.compose("build", *[s for s in services if s != "grafana"], timeout=UP_TIMEOUT_S)
        st.timings["build_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        st.compose("up", "-d", *services, timeout=UP_TIMEOUT_S)
        wait_until("fabric, controller and prometheus healthy",
                   lambda: all(st.health(s) == "healthy" for s in ("fabric", "controller", "prometheus")),
                   HEALTHY_TIMEOUT_S)
        wait_until("every switch in sync (the controller's metrics, through Prometheus)",
                   lambda: (r := st.query("min(aifabric_controller_switch_in_sync)")) and r[0]["value"][1] == "1",
                   DATA_TIMEOUT_S)
        st.timings["healthy_s"] = time.monotonic() - t1
        yield st
    except AssertionError:
        print(st.compose("logs", "--tail", "30", check=False))     # what the services said
        raise
    finally:
        t2 = time.monotonic()
        st.compose("down", "--remove-orphans", timeout=180, check=False)
        st.timings["down_s"] = time.monotonic() - t2
        print(f"\ndocker stack timings: {st.timings}")
        left = compose_leftovers(PROJECT)
        assert not any(left.values()), f"docker-compose down left {left}"


def dashboard_expressions() -> list[tuple[str, str, str]]:
    """(dashboard, panel, PromQL) of every panel target of every dashboard; AssertionError
    naming a panel that queries nothing (a placeholder)."""
    found = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            assert panel.get("targets"), f"{board['title']} / {panel['title']}: a panel with no query"
            for target in panel["targets"]:
                found.append((board["title"], panel["title"], target["expr"]))
    return found


def ring_allreduce(stack: Stack, names: list[str], job: int = 1) -> list[dict]:
    """A ring AllReduce among the hosts ``names``, each rank leaving its report in the run
    directory's RUN_SUBDIR (the controller's exporter reads it); what every rank printed."""
    desc = stack.description()
    h = {x.name: x for x in hosts(stack)}
    peers = ",".join(desc.host(n).ipv4.split("/")[0] for n in names)
    procs = [h[n].popen([CONTAINER_PYTHON, "-m", "hostagent.collectives", "ring", "--peers", peers, "--rank", str(r),
                         "--size", "4096", "--job", str(job), "--report-dir", f"/run/aifabric/{RUN_SUBDIR}"])
             for r, n in enumerate(names)]
    reports = []
    for name, proc in zip(names, procs):
        out, _ = proc.communicate(timeout=ALLREDUCE_TIMEOUT_S)
        lines = [line for line in out.decode().splitlines() if line.startswith("{")]
        assert proc.returncode == 0 and lines, f"{name}: {out.decode()[-500:]}"
        reports.append(json.loads(lines[-1]))
    return reports


def test_stack_fabric_prometheus_and_every_dashboard_query(stack: Stack) -> None:
    desc = stack.description()
    assert [s.name for s in desc.switches] == ["l0", "l1", "s0", "s1"]
    reach = all_pairs(stack)
    assert reach.pairs == 12 and not reach.failures(), reach.failures()
    assert not reach.needed_retry, f"pairs whose first echo request was lost: {reach.needed_retry}"

    # UDP flows (INT watches every TCP/UDP flow) from each leaf's host to the other leaf
    h = {x.name: x for x in hosts(stack)}
    addr = {x.name: x.ipv4.split("/")[0] for x in desc.hosts}
    traffic.udp_flows(h["l0h0"], addr["l1h1"], flows=8, count=20, python=CONTAINER_PYTHON)
    traffic.udp_flows(h["l1h0"], addr["l0h1"], flows=8, count=20, python=CONTAINER_PYTHON)
    t0 = time.monotonic()
    ranks = ring_allreduce(stack, ["l0h0", "l0h1", "l1h0", "l1h1"])
    stack.timings["ring_allreduce_s"] = time.monotonic() - t0
    assert all(r["ok"] for r in ranks), ranks

    targets = wait_until("every Prometheus target up", lambda: (t := _targets(stack)) and all(
        x["health"] == "up" for x in t) and t, DATA_TIMEOUT_S)
    assert {x["labels"]["job"] for x in targets} == {"controller", "int-collector"}

    expressions = dashboard_expressions()
    assert len(expressions) >= 28
    empty = {}
    # rate() panels see the last 30 s only: the flows go on while the panels are queried
    done = threading.Event()

    def keep_sending() -> None:
        while not done.wait(2.0):
            traffic.udp_flows(h["l0h0"], addr["l1h1"], flows=8, count=20, python=CONTAINER_PYTHON)

    more = threading.Thread(target=keep_sending, daemon=True)
    more.start()
    t1 = time.monotonic()
    try:
        for board, panel, expr in expressions:
            try:
                wait_until(f"{board} / {panel}", lambda: stack.query(expr), DATA_TIMEOUT_S if not empty else 5)
            except AssertionError:
                empty[f"{board} / {panel}"] = expr
    finally:
        done.set()
        more.join(30)
    stack.timings["dashboard_queries_s"] = time.monotonic() - t1
    assert not empty, f"dashboard queries with no data: {empty}"
    print(f"\n{len(expressions)} dashboard PromQL expressions returned data")
    # the AllReduce panels show the run the ranks reported: its slowest rank's time
    (run,) = stack.query('aifabric_allreduce_run_seconds{algorithm="ring", job_id="1"}')
    assert float(run["value"][1]) == pytest.approx(max(r["time_s"] for r in ranks))


def test_switches_and_hosts_run_on_the_native_paths(stack: Stack) -> None:
    """The fabric image carries the native libraries built in its `native` stage, not a compiler:
    every switch runs the fabric program natively (softswitch-ctl's packet_path) and a process
    group's transport runs on the hosts' native engine (its stats' host_path), as on a machine
    with gcc."""
    fabric, desc = stack.container("fabric"), stack.description()
    paths = {sw.name: json.loads(run("docker", "exec", fabric, "softswitch-ctl", "--addr", sw.runtime_address,
                                     "packet_path")) for sw in desc.switches}
    print(f"\npacket_path of {desc.switches[0].name}: {paths[desc.switches[0].name]}")
    not_native = {name: p.get("native_refused") for name, p in paths.items() if p.get("native") is not True}
    assert not_native == {}, f"switches not on the native data path, and why: {not_native}"
    h = {x.name: x for x in hosts(stack)}
    names = ["l0h0", "l1h0"]
    peers = ",".join(desc.host(n).ipv4.split("/")[0] for n in names)
    procs = [h[n].popen([CONTAINER_PYTHON, "-m", "hostagent.collectives.runner", "--peers", peers, "--rank", str(r),
                         "--calls", "all_reduce:ring", "--elements", "4097"]) for r, n in enumerate(names)]
    for name, proc in zip(names, procs):
        out, _ = proc.communicate(timeout=ALLREDUCE_TIMEOUT_S)
        lines = [line for line in out.decode().splitlines() if line.startswith("{")]
        assert proc.returncode == 0 and lines, f"{name}: {out.decode()[-500:]}"
        report = json.loads(lines[-1])
        assert report["ok"], report
        assert report["stats"]["host_path"] == "native", report["stats"].get("host_path_reason")


def test_the_controller_serves_the_live_page(stack: Stack) -> None:
    desc = stack.description()
    status, html, _ = http_get(stack.web + "/")
    assert status == 200 and b"cytoscape.min.js" in html
    status, library, _ = http_get(stack.web + "/vendor/cytoscape.min.js")   # carried into the image from make setup
    assert status == 200 and len(library) > 100_000, (status, library[:200])
    topology = json.loads(http_get(stack.web + "/api/topology")[1])
    drawn = sorted(n["id"] for n in topology["nodes"])
    assert drawn == sorted([s.name for s in desc.switches] + [h.name for h in desc.hosts])

    # changes: refused without the token and with a wrong one; done with the one the controller logged
    change, lb_mode = {"mode": "spray", "switches": ["l0"]}, stack.web + "/api/change/lb-mode"
    assert http_post(lb_mode, change)[0] == 401
    assert http_post(lb_mode, change, token="not-the-token")[0] == 403
    tokens = re.findall(r"changes need the token (\S+)", stack.compose("logs", "controller"))
    assert tokens, "the controller logged no token for the page's changes"
    status, answer = http_post(lb_mode, change, token=tokens[-1])
    assert status == 200, answer
    # the links are the fabric container's: the controller service says it cannot change them
    status, answer = http_post(stack.web + "/api/change/fail-link", {"a": "l0", "b": "s0"}, token=tokens[-1])
    assert status == 409, answer
    wait_until("l0 in spray mode on the page's state",
               lambda: json.loads(http_get(stack.web + "/api/state")[1])["switches"]["l0"]["lb_mode"] == "spray", 10)

    if BROWSER_MISSING:
        print(f"\nthe page was not opened in a browser: {BROWSER_MISSING}")
        return
    with headless_chromium() as browser:
        browser.get(stack.web)
        wait_until("the page live in the browser",
                   lambda: browser.execute_script("return fabricPage.connected && fabricPage.events > 0"), 15, 0.2)
        shown = browser.execute_script("""
            const cy = fabricPage.cy;
            return {nodes: cy.nodes('.switch, .host').filter((n) => n.visible()).map((n) => n.id()),
                    modes: Object.fromEntries(Object.entries(fabricPage.state.switches)
                                              .map(([name, s]) => [name, s.lb_mode]))};""")
    assert sorted(shown["nodes"]) == drawn
    assert shown["modes"]["l0"] == "spray" and shown["modes"]["l1"] != "spray", shown["modes"]


def _targets(stack: Stack) -> list[dict]:
    with urllib.request.urlopen(f"{stack.prometheus}/api/v1/targets", timeout=10) as answer:  # noqa: S310
        return json.loads(answer.read())["data"]["activeTargets"]


# Run in the fabric container: stop a switch target and start it again, empty, with the same
# command line and environment (so the fabric's teardown still finds it).
RESTART_SWITCH = """
import os, subprocess, sys, time
pid = int(sys.argv[1])
argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")[:-1]
env = dict(e.split(b"=", 1) for e in open(f"/proc/{pid}/environ", "rb").read().split(b"\\0") if b"=" in e)
os.kill(pid, 15)
while os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z":
    time.sleep(0.05)
subprocess.Popen(argv, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def test_killed_controller_reconciles_a_restarted_switch_when_it_returns(stack: Stack) -> None:
    desc = stack.description()
    leaf = desc.switch("l1")
    pushes_before = float(stack.query('aifabric_controller_pipeline_pushes_total{switch="l1"}')[0]["value"][1])
    stack.compose("kill", "controller")
    assert stack.health("controller") != "healthy"

    # while no controller runs, switch l1 restarts empty (same command line and environment)
    run("docker", "exec", stack.container("fabric"), "python3", "-c", RESTART_SWITCH, str(leaf.pid))
    broken = all_pairs(stack)
    assert broken.failures(), "hosts behind a switch with no pipeline were still reached"

    stack.compose("start", "controller")
    wait_until("the controller back and healthy", lambda: stack.health("controller") == "healthy", 120)
    # the new controller process pushed the pipeline to l1 alone: the others kept theirs
    wait_until("l1 programmed again by the returned controller",
               lambda: stack.query('aifabric_controller_pipeline_pushes_total{switch="l1"} == 1')
               and stack.query('aifabric_controller_pipeline_pushes_total{switch="l0"} == 0')
               and stack.query("min(aifabric_controller_switch_in_sync) == 1"), DATA_TIMEOUT_S)
    assert pushes_before == 1
    reach = all_pairs(stack)
    assert not reach.failures(), reach.failures()
    assert not reach.needed_retry, f"pairs whose first echo request was lost: {reach.needed_retry}"
