"""Collective communication on the hosts: the in-network aggregation backend (aggregation/), the
ring AllReduce baseline (baseline_ring, baseline_ringwire; the process group's ring algorithm is
algorithms/ring), the parameter server (ps), the UDP socket they share (transport),
seeded test tensors (tensors) and one process per host (`python -m hostagent.collectives`; wire
contract: p4src/README.md, "In-network aggregation")."""
