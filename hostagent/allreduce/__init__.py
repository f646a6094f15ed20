"""AllReduce on the host: the in-network aggregation worker, the parameter server and the ring
baseline (wire contract: p4src/README.md, "In-network aggregation"; run one process with `python -m hostagent.allreduce`)."""
