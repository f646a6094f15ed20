"""Load balancing on the switches (p4src/include/control/load_balance.p4): the mode of every
switch (`LbModes`: ecmp, spray, flowlet with its gap) and the traffic-engineering overrides that
pin flows to next hops (`TeOverrides`), both state sources of the `FabricController`, so they
are reconciled like routes and survive a switch restart. Where overrides come from is
controller.te's business."""
from controller.lb.modes import MODES, LbModes
from controller.lb.overrides import Pin, TeOverrides

__all__ = ["MODES", "LbModes", "Pin", "TeOverrides"]
