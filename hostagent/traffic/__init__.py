"""Traffic for comparing load-balancing modes: patterns, senders and receivers; and the lab's
simpler probes.

* `hostagent.traffic.patterns`: permutation, all-to-all, incast and collective (one ring
  AllReduce step) as lists of `FlowSpec`, seeded so every mode gets the same flows and ports;
* `python -m hostagent.traffic send|receive` (`hostagent.traffic.cli`): the processes run in
  the hosts, paced UDP (RoCEv2-like, destination port 4791, the source port is the entropy) and
  TCP, reporting per-flow JSON;
* `hostagent.traffic.drive`: start them in Mininet hosts and pair their reports per flow
  (`FlowResult`);
* `python -m hostagent.traffic.burst` (a burst of UDP flows, one datagram per source port a
  round) and `python -m hostagent.traffic.paced send|receive` (one paced UDP flow with ECT(0)
  and checkable payloads, and a receiver counting it per source with its CE marks): what
  `aifabric.lab.traffic` runs in hosts for its checks, demos and benchmarks.
"""
