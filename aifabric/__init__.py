"""aifabric's laboratory, in layers (each imports only those below it):

* `cli`: the ``aifabric`` command and its argument helpers (`topo_args`, `validate`, `load_balance_cli`,
  `workload_cli`);
* `experiments`: demos, benches, the AllReduce lab;
* `containers`: Compose, Swarm, container nodes, the fabric and controller services;
* `lab`: the running fabric, its description file, failures, checks, probes, traffic,
  interrupts, reports;
* `workloads`: training workloads from a model's shape (every rank's operations of an iteration,
  placement on a fabric's hosts, the scale to the emulated links, an analytic step time); pure
  Python over descriptions, it imports only `topologies.fabric` (no lab, no Mininet).

Beside them: `testing` (the pytest plugin and its ``fabric`` fixture) and `p4build` (``make p4``).
"""
