"""The load-balancing mode of each switch: ``lb_mode``'s default entry (a keyless table)."""
from __future__ import annotations

import threading

from p4.v1 import p4runtime_pb2

from controller.entries import entity
from controller.p4names import Action, Table

LB_MODE = Table.LOAD_BALANCE_LB_MODE
ACTIONS = {"ecmp": Action.LOAD_BALANCE_ECMP, "spray": Action.LOAD_BALANCE_SPRAY, "flowlet": Action.LOAD_BALANCE_FLOWLET}
MODES = tuple(ACTIONS)
DEFAULT_GAP_US = 500          # flowlet gap: well above a paced flow's packet spacing at our rates
PIPELINE_DEFAULT_MODE = "ecmp"  # lb_mode's default action in p4src: a switch no one set runs it


class LbModes:
    """``set(mode)`` on every switch (or the named ones); applied at once, no restart."""

    def __init__(self, controller) -> None:
        self.controller = controller
        self._modes: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()
        controller.add_state_source(self)

    def owned(self, switch: str) -> set[tuple]:
        return {("default", self.controller.pipeline.p4info.table_id(LB_MODE))}

    def entities(self, switch: str) -> list[p4runtime_pb2.Entity]:
        p4info = self.controller.pipeline.p4info
        with self._lock:
            mode, gap = self._modes.get(switch, (PIPELINE_DEFAULT_MODE, 0))
        params = {"gap_us": gap} if mode == "flowlet" else {}
        return [entity(p4info.table_entry(LB_MODE, action=ACTIONS[mode], params=params, default=True))]

    def mode(self, switch: str) -> str:
        with self._lock:
            return self._modes.get(switch, (PIPELINE_DEFAULT_MODE, 0))[0]

    def set(self, mode: str, switches: list[str] | None = None, gap_us: int = DEFAULT_GAP_US) -> None:
        if mode not in ACTIONS:
            raise ValueError(f"load-balancing mode {mode!r}: one of {', '.join(MODES)}")
        if mode == "flowlet" and not 0 < gap_us < 1 << 32:
            raise ValueError(f"flowlet gap {gap_us} us: must be in 1..2^32-1")
        names = switches if switches is not None else [sw.name for sw in self.controller.fabric.switches]
        for name in names:
            self.controller.fabric.switch(name)          # KeyError naming an unknown switch
        with self._lock:
            for name in names:
                self._modes[name] = (mode, gap_us if mode == "flowlet" else 0)
        self.controller.apply_now(names)
