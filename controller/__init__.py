"""aifabric's P4Runtime controller.

Modules, each owning one thing:

* `p4names`   - the fabric program's names and constants, GENERATED from p4src/build (`make p4names`)
* `p4info`    - P4Info names <-> ids, canonical value encoding, entity builders and descriptions
* `errors`    - exceptions naming the switch; parsing of per-update P4Runtime write errors
* `switch`    - `SwitchConnection`: a P4Runtime client for one switch
* `topology`  - `TopologyModel`: the fabric as a networkx graph, with link state
* `routing`   - `compute_forwarding`: per-switch routes and deduplicated ECMP next-hop sets
* `entries`   - the fabric program's table/profile/PRE entities for one switch's forwarding state
* `reconcile` - desired vs. actual entities -> ordered P4Runtime updates
* `fabric_controller` - `FabricController`: many switches, one process, reconciliation loop;
  `StateSource` and `Feature`, the interface every feature plugs in through
* `paths`     - the ECMP paths the routes install between two hosts (to check INT paths against)
* `metrics`   - Prometheus exporter (own registry) over the features: INT, ECN marks, link
  utilisation, collector, failure handling
* `web`       - the live page of the fabric (aiohttp, server-sent events, cytoscape.js): the
  topology by tier, link loads, INT, failures, modes, TE pins, AllReduce trees; changes with a token

Features, each a package that plugs into the `FabricController` (the core names none of them):

* `telemetry` - ECN and INT entities (`Telemetry`), the INT report decoder and collector
* `failover`  - heartbeats, data-plane failover, reroute, localisation (`FailureHandler`)
* `aggregation` - in-network aggregation jobs (`JobManager`)
* `load_balance` - load-balancing modes (`LbModes`); its `te`: Hedera's traffic engineering and
  the pins it writes (`TeOverrides`)
* `loss`      - emulated packet loss per port
"""
