"""The running fabric and what acts on it: bring-up and teardown (`lab.Lab`), the fabric
description file (`description`), failure injection (`failures`, its `control_socket`),
reachability and memory checks (`checks`), probes and traffic in hosts (`probe`, `traffic`),
interrupts (`interrupts`) and how measurements are reported (`report`).

The lowest layer of aifabric: it imports no other sub-package of it."""
