"""The P4 targets a whole-fabric test runs on: softswitch always, BMv2 where it is installed."""
import shutil

import pytest

FABRIC_TARGETS = [
    pytest.param("softswitch"),
    pytest.param("bmv2", marks=[pytest.mark.bmv2, pytest.mark.skipif(
        shutil.which("simple_switch_grpc") is None, reason="BMv2 simple_switch_grpc is not on PATH")]),
]
