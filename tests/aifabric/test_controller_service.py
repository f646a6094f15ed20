"""`aifabric controller --fabric FILE` as a process, against real P4Runtime servers.

Two in-process softswitches (no ports, so no root and no fabric) stand for a leaf-spine's
switches at free addresses the description names; the service must program both, show it in
its metrics (with each switch's load-balancing mode and aggregation counters, read from the
switches, and the AllReduce reports left beside the description), and program a switch again
after it restarts empty. A bad description ends the
command with one line naming the file.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from aifabric.lab.description import FabricDescription
from controller.aggregation.entries import OUTCOMES
from hostagent.collectives.report_files import RUN_SUBDIR, write_report
from tests.p4rt_support import running_switch
from topologies.fabric import leaf_spine
from emulation.testbed import free_tcp_port

AIFABRIC = [sys.executable, "-m", "aifabric.cli"]


def describe(addresses: dict[str, str], path: Path) -> Path:
    """A leaf-spine (2 leaves, 1 spine: 3 switches) whose switches are at ``addresses``."""
    desc = FabricDescription.from_fabric(leaf_spine(2, 1, 1))
    desc.switches = [dataclasses.replace(sw, p4runtime_address=addresses[sw.name]) for sw in desc.switches]
    return desc.write(path)


def scrape(port: int) -> dict[tuple[str, str], float]:
    """(metric, switch) -> value of the controller's own metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {(s.name, s.labels["switch"]): s.value
            for fam in text_string_to_metric_families(text) if fam.name.startswith("aifabric_controller_")
            for s in fam.samples}


def scrape_all(port: int) -> dict[tuple[str, tuple], float]:
    """(metric, sorted labels) -> value of every sample served."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def wait_for(port: int, want, what: str, timeout: float = 30.0, read=scrape) -> dict:
    deadline, seen = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            seen = read(port)
            if want(seen):
                return seen
        time.sleep(0.2)
    raise AssertionError(f"{what} not seen within {timeout:g} s; last metrics: {seen}")


@contextlib.contextmanager
def service(fabric_file: Path, metrics_port: int) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([*AIFABRIC, "controller", "--fabric", str(fabric_file),
                             "--metrics", f"127.0.0.1:{metrics_port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def test_service_programs_every_switch_and_reprograms_one_that_restarts(tmp_path: Path) -> None:
    names = ["l0", "l1", "s0"]
    with contextlib.ExitStack() as stack:
        switches = {n: stack.enter_context(running_switch(device_id=i + 1)) for i, n in enumerate(names)}
        fabric_file = describe({n: addr for n, (_sw, addr) in switches.items()}, tmp_path / "fabric.json")
        port = free_tcp_port()
        with service(fabric_file, port) as proc:
            def all_in_sync(m):
                return all(m.get(("aifabric_controller_switch_in_sync", n)) == 1 for n in names)

            seen = wait_for(port, all_in_sync, "every switch in sync")
            assert all(seen[("aifabric_controller_pipeline_pushes_total", n)] == 1 for n in names), seen
            _check_lb_and_allreduce_metrics(port, tmp_path, names)

            # l1 restarts empty at the same address: the service must push the pipeline again
            sw, addr = switches["l1"]
            sw.stop()
            stack.enter_context(_switch_at(addr, device_id=2))
            seen = wait_for(port, lambda m: all_in_sync(m)
                            and m.get(("aifabric_controller_pipeline_pushes_total", "l1")) == 2,
                            "l1 programmed again after its restart")
            assert seen[("aifabric_controller_pipeline_pushes_total", "l0")] == 1, seen
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=20)
            assert proc.returncode == 0, out


def _check_lb_and_allreduce_metrics(port: int, run_dir: Path, names: list[str]) -> None:
    """Two ranks' reports beside the description are served as one run; every switch's mode and
    its agg_ops counter (all outcomes, read from the switch: zeros) are served."""
    for rank, time_s in ((0, 0.5), (1, 0.8)):
        write_report(run_dir / RUN_SUBDIR, {"algorithm": "ring", "job": 4, "rank": rank, "workers": 2,
                                            "tensor_bytes": 4000, "time_s": time_s, "ok": True, "retransmissions": rank})
    run = (("algorithm", "ring"), ("job_id", "4"))
    m = wait_for(port, lambda m: ("aifabric_allreduce_run_seconds", run) in m
                 and sum(1 for k in m if k[0] == "aifabric_agg_ops_total") == len(OUTCOMES) * len(names),
                 "the AllReduce run and every switch's agg_ops", read=scrape_all)
    assert m[("aifabric_allreduce_run_seconds", run)] == 0.8
    assert m[("aifabric_allreduce_run_algbw_bytes_per_second", run)] == 5000
    assert m[("aifabric_allreduce_run_retransmissions", run)] == 1
    assert {dict(k)["switch"]: dict(k)["mode"] for (n, k) in m if n == "aifabric_lb_mode"} == dict.fromkeys(names, "ecmp")
    assert {v for (n, _), v in m.items() if n == "aifabric_agg_ops_total"} == {0}
    assert m[("aifabric_allreduce_jobs_running", ())] == 0


@contextlib.contextmanager
def _switch_at(addr: str, device_id: int) -> Iterator[object]:
    from softswitch.switch import Switch, SwitchConfig

    sw = Switch(SwitchConfig(device_id=device_id, ports=[], cpu_port=255, grpc_addr=addr))
    sw.start()
    try:
        yield sw
    finally:
        sw.stop()


def test_bad_or_missing_description_is_one_line_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "fabric.json"
    bad.write_text('{"schema": "aifabric.fabric-description/1", "kind": "leaf_spine", "params": {}, '
                   '"switches": [{"name": "l0"}], "hosts": [], "links": []}')
    for path, problem in ((bad, "switches[0].device_id: missing"), (tmp_path / "absent.json", "cannot read")):
        result = subprocess.run([*AIFABRIC, "controller", "--fabric", str(path)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and problem in lines[0], result.stderr


def test_each_log_line_is_written_once_and_ends_its_line(tmp_path: Path) -> None:
    """The service's log lines each once and on a line of its own (Mininet, imported with the
    command, gives every logger made after it a handler of its own that drops newlines: the
    first line came out three times, run together)."""
    nowhere = {sw.name: f"127.0.0.1:{free_tcp_port()}" for sw in leaf_spine(2, 1, 1).switches}
    proc = subprocess.Popen([*AIFABRIC, "controller", "--fabric", str(describe(nowhere, tmp_path / "fabric.json"))],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})     # nothing lost to the kill
    # its first line is written before it tries the switches: read until it came (a busy machine
    # may take many seconds to start the command), then stop the service
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any("controlling 3 switches" in line for line in list(seen)):
        time.sleep(0.1)
    time.sleep(1)           # a second copy of the line, if the logging wrote one, comes at once
    proc.kill()
    proc.wait(timeout=30)
    reader.join(10)
    out = "".join(seen)
    assert out.count("controlling 3 switches") == 1, out
    first = next(line for line in out.splitlines() if "controlling 3 switches" in line)
    assert first.endswith("(leaf_spine(leaves=2, spines=1, hosts_per_leaf=1))"), out


def test_sigterm_ends_the_service_while_its_switches_do_not_answer(tmp_path: Path) -> None:
    """Nothing listens at the switches' addresses: each connect would wait its 10 s timeout,
    and the service used to wait for them (over 30 s, longer than `docker stop` grants). A stop
    now ends the connects under way and starts none."""
    fabric_file = describe({n: f"127.0.0.1:{free_tcp_port()}" for n in ("l0", "l1", "s0")}, tmp_path / "fabric.json")
    with service(fabric_file, free_tcp_port()) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "controlling 3 switches" in first, first
        time.sleep(1.0)                            # the first connects are under way
        asked = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        took = time.monotonic() - asked
    assert proc.returncode == 0, first + out
    assert "stopped" in out, out
    assert took < 5.0, f"the service took {took:.1f} s to stop: it waited for its connects\n{out}"
