"""Traffic classes and lossless Ethernet (802.1Qbb PFC) on the fabric: "lossless" in every layer
(softswitch's set_lossless and softswitch/pfc.py, the lab's ``Lab(lossless=...)``, the hosts'
hostagent.lossless, ``aifabric demo lossless``).

* `config`: `TrafficClass` (priority, DSCPs, weight, depth, bit rate, ECN and PFC thresholds),
  `PfcThresholds`, `WatchdogConfig`, `LosslessConfig`;
* `entries`: the classes' P4Runtime entities (dscp_class, ecn_class_config);
* `target`: the run-time control commands of the targets' part (queues, PFC, watchdog), and
  what BMv2 cannot do (`Unsupported`: PFC needs softswitch);
* `manager`: `Lossless`, the classes on a running controller, and the lossless classes chosen
  per job (``use``/``release``);
* `metrics`: `ClassPoller` (every switch's classes and pauses, polled) and `LosslessCollector`
  (Prometheus), `paused_ports` (the live page's paused links).
"""
from controller.lossless.config import LosslessConfig, PfcThresholds, TrafficClass, WatchdogConfig
from controller.lossless.manager import Lossless
from controller.lossless.metrics import ClassPoller, LosslessCollector, paused_ports
from controller.lossless.target import CallableControl, RuntimeControl, Unsupported

__all__ = ["CallableControl", "ClassPoller", "Lossless", "LosslessCollector", "LosslessConfig", "PfcThresholds",
           "RuntimeControl", "TrafficClass", "Unsupported", "WatchdogConfig", "paused_ports"]
