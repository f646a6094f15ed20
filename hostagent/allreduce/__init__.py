"""AllReduce on the host: the in-network aggregation worker, the parameter server and the ring
baseline (wire contract: /work/notes/agg_spec.md; run one process with `python -m hostagent.allreduce`)."""
