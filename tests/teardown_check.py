"""What a fabric test checks after its lab is gone: nothing of that fabric is left."""
from topologies.addressing import TELEMETRY_BRIDGE
from topologies.fabric import Fabric
from topologies.p4switch import cleanup


def assert_torn_down(fabric: Fabric) -> None:
    """No process, namespace or link of ``fabric``'s nodes is left. Only its own nodes are
    swept: what an earlier, killed run left under other names is `aifabric clean`'s to remove,
    not a fault of this teardown."""
    nodes = [*(s.name for s in fabric.switches), *(h.name for h in fabric.hosts), TELEMETRY_BRIDGE]
    left = cleanup(nodes=nodes)
    assert not left.killed and not left.links_deleted, f"teardown left {left}"
