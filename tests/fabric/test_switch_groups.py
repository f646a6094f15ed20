"""A fabric whose softswitches are served a group a process (emulation.switch_group): a k=4
fat-tree's 20 switches in three processes (8, 8 and 4) come up on the native path, every pair
of hosts reaches every other, each switch keeps its own run-time control, a failure injected
into one switch is refused (it would kill its whole group), and teardown leaves nothing."""
from __future__ import annotations

import json

import pytest

from aifabric.lab import checks
from aifabric.lab.failures import FailureError, Failures
from aifabric.lab.lab import Lab
from emulation.p4switch import port_accepts
from topologies.fabric import fat_tree

PER_PROCESS = 8


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(fat_tree(4), target="softswitch", log_dir=tmp_path_factory.mktemp("logs"),
             switches_per_process=PER_PROCESS) as lab:
        yield lab


def test_twenty_switches_in_three_processes_run_natively(lab):
    processes = lab.target_pids()
    assert len(processes) == 3 and all(name.startswith("group-") for name in processes), processes
    assert len(set(lab.switch_pids().values())) == 3 and len(lab.switch_pids()) == 20
    for sw in lab.net.switches:
        if hasattr(sw, "runtime_command"):
            status = json.loads(sw.runtime_command("packet_path"))
            assert status["native"] is True, (sw.name, status)


def test_every_pair_of_hosts_reaches(lab):
    reach = checks.all_pairs(lab, "ipv4")
    assert reach.pairs == 16 * 15 and not reach.failures(), reach.failures()


def test_each_switch_keeps_its_own_run_time_control(lab):
    one, other = lab.switch("p0e0"), lab.switch("p0e1")
    assert one.group is other.group                 # served by one process
    one.set_queue_depth(17, 1)
    assert json.loads(one.runtime_command("get_queue 1"))["depth"] == 17
    assert json.loads(other.runtime_command("get_queue 1"))["depth"] != 17


def test_a_failure_of_one_switch_is_refused_naming_its_group(lab):
    name = lab.fabric.switches[0].name
    with pytest.raises(FailureError, match=rf"switch {name} is served by group-\S+ with 7 other switches"):
        Failures(lab).fail_switch(name)
    assert port_accepts(lab.switch(name).grpc_port)
