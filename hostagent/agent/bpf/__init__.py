"""The host agent's BPF side: C programs (tc_agent.c and the headers it includes) beside their
loader (`hostagent.agent.bpf.loader`) and a look at what the kernel holds (`inventory`)."""
