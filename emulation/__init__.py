"""aifabric's emulation layer: fabrics of `topologies` brought up on this machine with Mininet and
P4 switch targets (`mininet_topo`, `p4switch`), the processes they start and how they are found
and removed (`procs`, `cleanup`), the telemetry bridge, the failover heartbeat generator and the
BMv2 control-port helpers. See emulation/README.md."""
