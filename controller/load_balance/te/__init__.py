"""Centralized traffic engineering in Hedera's manner (SIGCOMM/NSDI'10), on the topology model.

* `flows`: `Flow` (5-tuple and its two hosts), `FlowRate`, `HostDirectory` (address -> host);
* `elephants`: `FlowCounts` from a pluggable `FlowSource`, `detect_elephants` (>= 10% of the
  host link by default);
* `demand`: `estimate_demands`, Hedera's max-min natural demands under host-link limits;
* `index`: `FabricIndex`, integer ids of switches and directed links, paths -> hops;
* `nexthops`: `PathSpace`, the equal-cost next hops towards a switch (fat-tree arithmetic, or
  breadth-first search for any topology or link state);
* `placement`: `global_first_fit`, Hedera's Global First Fit with per-link reservations;
* `ecmp_model`: what static seeded ECMP would do with the same flows;
* `evaluate`: link loads and max-min fair rates of a set of paths;
* `engine`: `TrafficEngineer`, one round = detect, estimate, place, diff the override entries;
* `sampling`: `FlowSampler`, the measurement source on a live fabric (edge switches sample
  packets to the controller);
* `overrides`: `TeOverrides`, the ``te_override`` table's writer (flows pinned to next hops), a
  state source of the `FabricController`;
* `loop`: `TeLoop`, sampler + engineer + the ``te_override`` writer, a round every period.

Only `sampling`, `overrides` and `loop` speak P4Runtime (through the `FabricController`); the rest works on
the topology model alone, and the engine's rounds return plain `OverrideEntry` records.
"""
from controller.load_balance.te.demand import estimate_demands
from controller.load_balance.te.elephants import DEFAULT_ELEPHANT_FRACTION, FlowCounts, FlowSource, detect_elephants
from controller.load_balance.te.engine import OverrideEntry, TeConfig, TeRound, TrafficEngineer
from controller.load_balance.te.flows import Flow, FlowRate, HostDirectory
from controller.load_balance.te.index import FabricIndex
from controller.load_balance.te.nexthops import PathSpace
from controller.load_balance.te.placement import Placement, PlacementResult, global_first_fit

__all__ = [
    "DEFAULT_ELEPHANT_FRACTION", "FabricIndex", "Flow", "FlowCounts", "FlowRate", "FlowSource",
    "HostDirectory", "OverrideEntry", "PathSpace", "Placement", "PlacementResult", "TeConfig",
    "TeRound", "TrafficEngineer", "detect_elephants", "estimate_demands", "global_first_fit",
]
