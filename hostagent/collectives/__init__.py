"""Collective communication on the hosts: the in-network aggregation backend (aggregation/), the
ring AllReduce (ring, ringwire), the parameter server (ps), the UDP socket they share (transport),
seeded test tensors (tensors) and one process per host (`python -m hostagent.collectives`; wire
contract: p4src/README.md, "In-network aggregation")."""
