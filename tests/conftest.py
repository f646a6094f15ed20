"""The tests are laid out like the packages (tests/softswitch/, tests/controller/,
tests/hostagent/, tests/topologies/, tests/emulation/, tests/aifabric/; end-to-end tests on whole fabrics in
tests/fabric/). Their shared helpers stay here, in tests/ (`targets`, `p4rt_support`,
`hostagent_support`, `docker_support`, `teardown_check`, `exposure`, `scenarios`), imported by
their plain names from any of those folders: this directory is put on sys.path first."""
import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
