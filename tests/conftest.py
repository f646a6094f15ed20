"""The tests are laid out like the packages (tests/softswitch/, tests/controller/,
tests/hostagent/, tests/topologies/, tests/emulation/, tests/aifabric/; end-to-end tests on whole fabrics in
tests/fabric/). Their shared helpers stay here, in tests/ (`targets`, `p4rt_support`,
`hostagent_support`, `docker_support`, `teardown_check`, `exposure`, `scenarios`), imported by
their plain names from any of those folders: this directory is put on sys.path first."""
import sys
from pathlib import Path

import pytest

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

FABRIC_TESTS = Path(TESTS) / "fabric"


@pytest.hookimpl(tryfirst=True)        # before xdist's worker reads the groups off the items
def pytest_collection_modifyitems(config, items) -> None:
    """A lab uses the machine's switch names, gRPC ports and Docker, so only one runs at a time:
    under pytest-xdist (`make test` runs several workers, `--dist loadgroup`) every test that
    brings one up (marked ``slow``, or in tests/fabric/) goes to the same worker, one after
    another; the rest (their names and ports their own) run beside them on the other workers."""
    for item in items:
        if item.get_closest_marker("slow") or FABRIC_TESTS in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("lab"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids) -> None:
    """A worker's lab tests carry the group xdist schedules them by; where they do not (pytest
    9.2 dropped it, see pyproject.toml), labs would collide one test in two: refuse to run."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    lost = [i for i in ids if i.startswith("tests/fabric/") and not i.endswith("@lab")]
    if lost:
        raise pytest.UsageError(f"xdist's --dist loadgroup did not group {len(lost)} lab tests (e.g. {lost[0]}) "
                                f"with pytest {pytest.__version__}: they would bring up labs side by side")
