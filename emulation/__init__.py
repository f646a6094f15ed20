"""aifabric's emulation layer: fabrics of `topologies` brought up on this machine with Mininet and
P4 switch targets (`mininet_topo`, `p4switch`), the processes they start and how they are found
and removed (`procs`, `cleanup`), the telemetry bridge, the failover heartbeat generator and the
BMv2 control-port helpers. See emulation/README.md."""

import logging

try:
    import mininet.log  # noqa: F401 - imported here first, for what follows
except ImportError:       # a machine without Mininet (the controller's container) uses the rest
    pass
else:
    # Mininet makes every logger created after its import a MininetLogger with a handler of its
    # own that prints without line breaks: the controller's warnings ran together on one line.
    # Loggers created from here on are plain again (Mininet's own keeps its handler).
    logging.setLoggerClass(logging.Logger)
