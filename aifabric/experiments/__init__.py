"""Experiments run on a `aifabric.lab.lab.Lab`: the demos (`demo_fabric`, `demo_int`,
`demo_allreduce`), the AllReduce lab they and the benchmarks share (`allreduce_lab`), and the
load-balancing and failover benches (`load_balance_bench`, `failover_bench`). Built on `aifabric.lab`."""
