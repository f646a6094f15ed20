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
"""
