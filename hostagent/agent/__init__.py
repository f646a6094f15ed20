"""Host agents: PLB repathing and DCQCN for any flow, TCP or RoCEv2-like UDP, in eBPF (bcc).

Google's PLB moves a congested flow to another path by changing what the switches hash on;
Linux has it for TCP with DCTCP only (net/ipv4/tcp_plb.c), RDMA NICs not at all. Here one
agent per host does it from outside the transport, fed by the ECN marks the fabric sets, with a
DCQCN reaction point beside it:

* `bpf/` (tc_agent.c, loaded by `bpf.loader`): TC clsact programs on the host's interface.
  Egress rewrites the IPv6 flow label and, for RoCEv2, the UDP source port of moved flows and
  counts what is sent; ingress counts packets and CE marks per flow (receiver side), ACKs and
  ECN-Echo (TCP sender side), sends CNPs (at most one per flow per interval) and receiver
  reports (the CE fraction PLB needs) back, and consumes those arriving for this host's flows.
* `plb` and `dcqcn`: the two state machines, pure logic.
* `agent`: the per-host process's loop (rounds, repaths, reaction points, rates to the
  traffic sender through `hostagent.traffic.ratecontrol`), `config` and `cli`
  (``hostagent plb|dcqcn|plb+dcqcn``), `stats` (JSON per agent), `metrics` (Prometheus).
* `launch`: start and stop agents in many (Mininet) hosts; `aifabric.lab.lab.Lab(hostagent=...)`.
"""
