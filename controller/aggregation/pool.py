"""The slot pool every aggregating switch holds (p4src: AGG_POOL_SLOTS), handed out to jobs in
disjoint ranges. One pool serves the whole fabric: a job gets the same range on every switch of
its tree, so one allocation is enough and ranges of different jobs never overlap anywhere. A pool
slot holds one 64-value block (two sets of it): a job of B-block frames takes B a frame."""
from __future__ import annotations

from dataclasses import dataclass, field

POOL_SLOTS = 1024  # p4src/include/define.p4: AGG_POOL_SLOTS


@dataclass
class SlotPool:
    """First-fit allocation of slot ranges [base, base + count)."""

    size: int = POOL_SLOTS
    _used: dict[int, int] = field(default_factory=dict)   # base -> count

    def allocate(self, count: int) -> int | None:
        """The base of a free range of ``count`` slots, or None when no such range is free."""
        if count < 1:
            raise ValueError(f"a slot range needs at least 1 slot, not {count}")
        base = 0
        for used_base, used_count in sorted(self._used.items()):
            if used_base - base >= count:
                break
            base = max(base, used_base + used_count)
        if base + count > self.size:
            return None
        self._used[base] = count
        return base

    def free(self, base: int) -> None:
        if base not in self._used:
            raise KeyError(f"no slot range starts at {base}")
        del self._used[base]

    @property
    def free_slots(self) -> int:
        return self.size - sum(self._used.values())
