"""aifabric's topologies: the address plan (`addressing`), pure descriptions of fat-trees and
leaf-spines (`fabric`), their Mininet topologies (`mininet_topo`) and the Mininet node that runs a
P4Runtime target per switch (`p4switch`). See topologies/README.md for the plan."""
