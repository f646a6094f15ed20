"""Load balancing on the switches (p4src/include/control/load_balance.p4): the mode of every
switch (`LbModes`: ecmp, spray, flowlet with its gap) and the traffic-engineering overrides that
pin flows to next hops (`TeOverrides`), both state sources of the `FabricController`, so they
are reconciled like routes and survive a switch restart. The traffic engineering that decides
the overrides (Hedera's loop) is `controller.load_balance.te`, the overrides' writer beside it
(`te.overrides`); ``te`` and ``plb`` (on the hosts, `hostagent.agent.load_balance_plb`) are
names of modes of this one feature."""
from controller.load_balance.modes import MODES, LbModes
from controller.load_balance.te.overrides import Pin, TeOverrides

__all__ = ["MODES", "LbModes", "Pin", "TeOverrides"]
