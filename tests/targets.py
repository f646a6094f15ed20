"""The P4 targets a whole-fabric test runs on: softswitch always, BMv2 where it is installed.

A BMv2 k=4 fat-tree is 20 simple_switch_grpc processes, which keep a 2-core machine's CPU busy by
themselves: its runs take minutes and its timing is the machine's more than the fabric's. The
default suite runs on BMv2 what shows each capability there once (aggregation, failures, the AI
fabrics, the firewall example, every packet scenario against softswitch: FABRIC_TARGETS); the
heavier whole-fabric modules (collectives at 16 ranks, failover timing, training, load balancing:
FULL_FABRIC_TARGETS) run on BMv2 with AIFABRIC_BMV2_FULL=1 (`make test-bmv2`), and are skipped
by name otherwise.
"""
import os
import shutil

import pytest

_NO_BMV2 = pytest.mark.skipif(shutil.which("simple_switch_grpc") is None,
                              reason="BMv2 simple_switch_grpc is not on PATH")
_NOT_FULL = pytest.mark.skipif(os.environ.get("AIFABRIC_BMV2_FULL") != "1",
                               reason="BMv2 whole-fabric module: runs with AIFABRIC_BMV2_FULL=1 (make test-bmv2)")

FABRIC_TARGETS = [
    pytest.param("softswitch"),
    pytest.param("bmv2", marks=[pytest.mark.bmv2, _NO_BMV2]),
]
FULL_FABRIC_TARGETS = [
    pytest.param("softswitch"),
    pytest.param("bmv2", marks=[pytest.mark.bmv2, _NO_BMV2, _NOT_FULL]),
]


def only_in_full(target: str) -> None:
    """In a module whose fabric runs on BMv2 in the default suite for one check alone, skip the
    others there: on BMv2 they run with AIFABRIC_BMV2_FULL=1 (`make test-bmv2`)."""
    if target == "bmv2" and os.environ.get("AIFABRIC_BMV2_FULL") != "1":
        pytest.skip("BMv2 whole-fabric check: runs with AIFABRIC_BMV2_FULL=1 (make test-bmv2)")
