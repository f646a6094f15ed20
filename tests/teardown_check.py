"""What a fabric test checks after its lab is gone: nothing of that fabric is left."""
from aifabric.lab.lab import fabric_nodes
from topologies.fabric import Fabric
from emulation.cleanup import cleanup


def assert_torn_down(fabric: Fabric) -> None:
    """No process, namespace or link of ``fabric``'s nodes is left. Only its own nodes are
    swept: what an earlier, killed run left under other names is `aifabric clean`'s to remove,
    not a fault of this teardown."""
    left = cleanup(nodes=fabric_nodes(fabric))
    assert not left.killed and not left.links_deleted, f"teardown left {left}"
