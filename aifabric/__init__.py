"""aifabric's laboratory, in layers (each imports only those below it):

* `cli`: the ``aifabric`` command and its argument helpers (`topo_args`, `validate`, `load_balance_cli`);
* `experiments`: demos, benches, the AllReduce lab;
* `containers`: Compose, Swarm, container nodes, the fabric and controller services;
* `lab`: the running fabric, its description file, failures, checks, probes, traffic,
  interrupts, reports.

Beside them: `testing` (the pytest plugin and its ``fabric`` fixture) and `p4build` (``make p4``).
"""
