"""BMv2's queue rate and depth set through its Thrift service in-process (emulation.bmv2_queues),
as the fabric's switches get them (`P4Switch.set_queue_rate` / `set_queue_depth`), checked on a
real simple_switch_grpc running queueing.p4 on veths: a burst on a port whose rate was set
leaves at that rate (its egress timestamps), a burst into a port whose depth was set to 3 loses
what does not fit while the same burst at the default depth loses nothing; a switch that does
not answer, or a command that is not a queue setting, is refused in one line."""
from __future__ import annotations

import os
import shutil

import pytest

from emulation.bmv2_cli import Bmv2CliError
from emulation.bmv2_queues import is_queue_command, set_queue
from emulation.testbed import free_tcp_port
from scenarios.queueing import Q, Q_AT, _frame, _setup
from scenarios.runner import Scenario, Send, Step, program_files, run

RATE_PPS = 50
BURST = 8
SLOW_PPS = 10          # slow enough that a burst of BURST waits in the queue
DEPTH = 3


def _queue(command: str) -> Step:
    def step(s) -> bytes:
        set_queue(s.thrift_port, command)
        return command.encode()
    return Step(step)


def _left(outputs, at: int) -> list[dict]:
    return sorted((Q.unpack(f[Q_AT:]) for port, f in outputs[at] if port == 2),
                  key=lambda q: q["egress_global_timestamp"])


@pytest.mark.bmv2
@pytest.mark.skipif(shutil.which("simple_switch_grpc") is None, reason="BMv2 simple_switch_grpc is not on PATH")
@pytest.mark.skipif(shutil.which("simple_switch_CLI") is None, reason="BMv2's Thrift bindings come with its CLI")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, raw sockets)")
def test_rate_and_depth_take_effect_through_thrift():
    if not program_files("queueing")[0].exists():
        pytest.skip("tests/p4/build/queueing.json is not built (run `make p4` where p4c is installed)")
    burst = [Send(1, _frame(700 + i), repeat=BURST) for i in range(3)]
    sc = Scenario("queues-through-thrift", "queueing",
                  [_queue(f"set_queue_rate {RATE_PPS} 2"), burst[0],
                   _queue(f"set_queue_rate {SLOW_PPS} 2"), burst[1],
                   _queue(f"set_queue_depth {DEPTH} 2"), burst[2]],
                  setup=_setup, ports=2, timeout=2.0)
    outputs = run("bmv2", sc)
    rated = _left(outputs, 1)
    assert len(rated) >= BURST - 1, f"{len(rated)} of {BURST} frames left port 2"
    span = rated[-1]["egress_global_timestamp"] - rated[0]["egress_global_timestamp"]
    want = (len(rated) - 1) * 1e6 / RATE_PPS * 0.8
    assert span >= want, f"{len(rated)} departures within {span} us: the rate of {RATE_PPS}/s was not applied"
    # at the default depth (64) the slow port keeps the whole burst; at 3 what does not fit is dropped
    # (one more or less: BMv2's ingress and egress threads race for the first frame)
    assert len(_left(outputs, 3)) >= BURST - 1, f"the default depth dropped: {len(_left(outputs, 3))} of {BURST} left"
    shallow = len(_left(outputs, 5))
    assert shallow <= DEPTH + 2, f"{shallow} of {BURST} frames left a queue of depth {DEPTH}"


def test_a_switch_that_does_not_answer_is_named_in_one_line():
    """Where BMv2's Thrift bindings are installed, the silent port is named; where they are not,
    what is missing is (the call never reaches the port)."""
    port = free_tcp_port()
    with pytest.raises(Bmv2CliError) as err:
        set_queue(port, "set_queue_depth 64")
    named = "simple_switch_CLI is not on PATH" if shutil.which("simple_switch_CLI") is None else f"127.0.0.1:{port}"
    assert named in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_only_queue_settings_are_taken():
    assert is_queue_command("set_queue_depth 64") and is_queue_command("set_queue_rate 50 3")
    for other in ("table_add fwd set_port 1 => 2", "set_queue_depth", "set_queue_rate 50 3 7", "set_queue_depth x"):
        assert not is_queue_command(other), other
        with pytest.raises(ValueError):
            set_queue(9090, other)
