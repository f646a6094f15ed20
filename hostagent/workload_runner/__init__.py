"""One rank of a training workload executed on its host: every op of the rank's list (written by
aifabric.workloads) run on its stream, compute as a sleep of its emulated duration, collectives
and sends through hostagent.collectives on the op's group, with per-op start and end times
(`python -m hostagent.workload_runner`; `accounting` splits a step into compute and exposed
communication)."""
