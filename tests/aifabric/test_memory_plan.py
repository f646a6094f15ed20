"""How many switches a softswitch process serves and what a fabric needs (aifabric.lab.memory_plan):
one process a switch while the fabric fits, groups when it would not (a k=16 fat-tree on a 24
GiB machine), BMv2 never grouped, a fabric that fits neither way refused with its figures, and
softswitch ports on AF_XDP (pinned frames) while the fabric fits with them, else on AF_PACKET."""
from __future__ import annotations

import pytest

from aifabric.lab import memory_plan as mp

K4, K16 = (20, 16), (320, 1024)        # (switches, hosts) of fat-trees
K4_PORTS, K16_PORTS = 80, 5120          # their switches' ports (k a switch)


def test_a_fabric_that_fits_gets_a_process_a_switch():
    plan = mp.plan(*K4, "softswitch", available_mib=8 * 1024)
    assert plan.switches_per_process == 1 and plan.processes == 20
    assert plan.need_mib == 20 * mp.OWN_PROCESS_MIB + 16 * mp.HOST_MIB


def test_k16_is_grouped_and_fits_a_24_gib_machine():
    available = 21 * 1024                  # what such a machine has available, idle
    own = mp.MemoryPlan(*K16, "softswitch", 1)
    assert own.need_mib > mp.OWN_PROCESSES_SHARE * available
    plan = mp.plan(*K16, "softswitch", available)
    assert plan.switches_per_process == mp.GROUP_SIZE and plan.processes == 10
    assert plan.need_mib == 10 * mp.GROUP_BASE_MIB + 320 * mp.GROUPED_SWITCH_MIB + 1024 * mp.HOST_MIB
    mp.check("fat-tree k=16", plan, available)


def test_bmv2_is_never_grouped():
    assert mp.plan(*K16, "bmv2", available_mib=1024).switches_per_process == 1
    with pytest.raises(ValueError, match="only softswitch serves several switches in one process, not bmv2"):
        mp.plan(*K4, "bmv2", 8 * 1024, switches_per_process=4)


def test_a_fabric_that_cannot_fit_is_refused_with_its_figures():
    plan = mp.plan(*K16, "softswitch", available_mib=4 * 1024)
    with pytest.raises(ValueError, match=r"k=16: 320 switches \(32 a process, 10 processes\) and 1024 hosts "
                                         r"need about [0-9.]+ GiB, this machine has 4.0 GiB available"):
        mp.check("k=16", plan, 4 * 1024)
    with pytest.raises(ValueError, match="must be 1 or more, not 0"):
        mp.plan(*K4, "softswitch", 8 * 1024, switches_per_process=0)


def test_af_xdp_ports_are_counted_and_a_fabric_too_big_for_them_reads_af_packet_sockets():
    plan = mp.plan(*K4, "softswitch", available_mib=8 * 1024, ports=K4_PORTS)
    assert plan.port_io == "auto" and plan.switches_per_process == 1
    assert plan.need_mib == 20 * mp.OWN_PROCESS_MIB + 16 * mp.HOST_MIB + 80 * mp.XSK_PORT_MIB
    assert "AF_XDP on 80 ports" in plan.describe()
    available = 21 * 1024
    big = mp.plan(*K16, "softswitch", available, ports=K16_PORTS)       # 20 GiB of frames: not with them
    assert big.port_io == "packet" and big.switches_per_process == mp.GROUP_SIZE
    assert big.need_mib == mp.plan(*K16, "softswitch", available).need_mib
    mp.check("fat-tree k=16", big, available)
    assert mp.plan(*K4, "bmv2", 8 * 1024, ports=K4_PORTS).need_mib == 20 * mp.BMV2_SWITCH_MIB + 16 * mp.HOST_MIB
