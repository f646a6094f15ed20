"""aifabric's topologies, pure descriptions: the address plan (`addressing`) and fat-trees,
leaf-spines (`fabric`), the AI-cluster shapes (`ai_fabrics`) and every shape by name (`shapes`). Nothing here imports Mininet or
starts a process; bringing a fabric up is `emulation`'s. See topologies/README.md for the plan."""
