"""aifabric's P4Runtime controller.

Modules, each owning one thing:

* `p4info`    - P4Info names <-> ids, canonical value encoding, entity builders and descriptions
* `errors`    - exceptions naming the switch; parsing of per-update P4Runtime write errors
* `switch`    - `SwitchConnection`: a P4Runtime client for one switch
* `topology`  - `TopologyModel`: the fabric as a networkx graph, with link state
* `routing`   - `compute_forwarding`: per-switch routes and deduplicated ECMP next-hop sets
* `entries`   - the fabric program's table/profile/PRE entities for one switch's forwarding state
* `reconcile` - desired vs. actual entities -> ordered P4Runtime updates
* `fabric_controller` - `FabricController`: many switches, one process, reconciliation loop
* `telemetry_entries` - ECN thresholds, INT watchlist/sink/report config, ECMP seeds per switch
* `paths`     - the ECMP paths the routes install between two hosts (to check INT paths against)
* `int_report` - Telemetry Report v2.0 / INT-MD v2.1 decoder (pure), `Report`/`FlowKey`/`HopRecord`
* `int_collector` - `IntCollector`: UDP server, per-flow paths, per-port queue/latency, counters
* `metrics`   - Prometheus exporter (own registry): INT, ECN marks, link utilisation, collector
"""
