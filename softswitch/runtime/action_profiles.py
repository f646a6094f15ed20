"""Action profiles and action selectors (members, groups, hash-based member choice).

Member choice is BMv2's, so the same packet picks the same member on both targets: BMv2
gives every member the lowest free handle when it is created, keeps a group's members as a
set sorted by handle, and picks ``members[hash % len(members)]`` with the selector's hash
truncated to 32 bits (a packet's pick is made in the generated code: pipeline/codegen/tables.py).
A member of weight w appears w times, through extra handles, as PI programs BMv2
(proto/frontend/src/action_prof_mgr.cpp): a group update walks the old and new members in
member-id order, creating the handles a member lacks for its new weight, then deletes the
copies that no group needs any more (a member keeps its first handle).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .tables import ActionSpec, TableError


class HandleAllocator:
    """Lowest free non-negative integer, as BMv2's HandleMgr."""

    def __init__(self) -> None:
        self._used: set[int] = set()

    def get(self) -> int:
        h = 0
        while h in self._used:
            h += 1
        self._used.add(h)
        return h

    def release(self, h: int) -> None:
        self._used.discard(h)


@dataclass(eq=False)
class Member:
    id: int
    action: ActionSpec
    data: tuple
    handles: list[int] = field(default_factory=list)   # handles[0] is the member itself


@dataclass(eq=False)
class Group:
    id: int
    max_size: int
    weights: dict[int, int] = field(default_factory=dict)   # member id -> weight
    handles: list[int] = field(default_factory=list)        # sorted BMv2 member handles


class ActionProfile:
    def __init__(self, name: str, profile_id: int, max_size: int, selector: Any = None):
        self.name = name
        self.id = profile_id
        self.max_size = max_size
        self.selector = selector          # a Calculation, for action selectors
        # members, groups and by_handle: the generated code holds these dicts (an indirect
        # table's action: pipeline/codegen/tables.py), so they are changed in place, never replaced
        self.members: dict[int, Member] = {}
        self.groups: dict[int, Group] = {}
        self._handles = HandleAllocator()
        self.by_handle: dict[int, Member] = {}
        self.mirror: Any = None           # native/objects.py: told every change (None: Python path)

    def _changed(self) -> None:
        if self.mirror is not None:
            self.mirror.profile_changed(self)

    # -- members -------------------------------------------------------------------------
    def insert_member(self, member_id: int, action: ActionSpec, data: tuple) -> None:
        if member_id in self.members:
            raise TableError("ALREADY_EXISTS", f"action profile '{self.name}': member {member_id} exists")
        if len(self.members) >= self.max_size:
            raise TableError("RESOURCE_EXHAUSTED", f"action profile '{self.name}' is full")
        m = Member(member_id, action, data)
        self._add_handle(m)
        self.members[member_id] = m
        self._changed()

    def modify_member(self, member_id: int, action: ActionSpec, data: tuple) -> None:
        m = self._member(member_id)
        m.action, m.data = action, data
        self._changed()

    def delete_member(self, member_id: int, in_use: bool) -> None:
        m = self._member(member_id)
        if in_use or any(member_id in g.weights for g in self.groups.values()):
            raise TableError("FAILED_PRECONDITION",
                             f"action profile '{self.name}': member {member_id} is still used")
        for h in m.handles:
            self._handles.release(h)
            del self.by_handle[h]
        del self.members[member_id]
        self._changed()

    def _add_handle(self, m: Member) -> None:
        h = self._handles.get()
        m.handles.append(h)
        self.by_handle[h] = m

    def _member(self, member_id: int) -> Member:
        m = self.members.get(member_id)
        if m is None:
            raise TableError("NOT_FOUND", f"action profile '{self.name}': no member {member_id}")
        return m

    # -- groups --------------------------------------------------------------------------
    def insert_group(self, group_id: int, max_size: int, weights: dict[int, int]) -> None:
        if group_id in self.groups:
            raise TableError("ALREADY_EXISTS", f"action profile '{self.name}': group {group_id} exists")
        g = Group(group_id, max_size)
        self._set_group_members(g, weights)
        self.groups[group_id] = g
        self._changed()

    def modify_group(self, group_id: int, max_size: int, weights: dict[int, int]) -> None:
        g = self.group(group_id)
        self._set_group_members(g, weights)
        g.max_size = max_size
        self._changed()

    def delete_group(self, group_id: int, in_use: bool) -> None:
        g = self.group(group_id)
        if in_use:
            raise TableError("FAILED_PRECONDITION",
                             f"action profile '{self.name}': group {group_id} is still used")
        del self.groups[group_id]
        for mid in sorted(g.weights):
            self._purge_copies(self.members[mid])
        self._changed()

    def group(self, group_id: int) -> Group:
        g = self.groups.get(group_id)
        if g is None:
            raise TableError("NOT_FOUND", f"action profile '{self.name}': no group {group_id}")
        return g

    def _set_group_members(self, g: Group, weights: dict[int, int]) -> None:
        for mid, w in weights.items():
            self._member(mid)
            if w < 1:
                raise TableError("INVALID_ARGUMENT", f"group {g.id}: member {mid} has weight {w}")
        total = sum(weights.values())
        if g.max_size and total > g.max_size:
            raise TableError("RESOURCE_EXHAUSTED",
                             f"group {g.id}: {total} members exceed its max_size {g.max_size}")
        touched = sorted(set(g.weights) | set(weights))
        for mid in touched:
            m = self.members[mid]
            while len(m.handles) < weights.get(mid, 0):
                self._add_handle(m)
        g.weights = dict(weights)
        g.handles = sorted(h for mid, w in weights.items() for h in self.members[mid].handles[:w])
        for mid in touched:
            self._purge_copies(self.members[mid], g)

    def _purge_copies(self, m: Member, updated: Group | None = None) -> None:
        """Release the handles of ``m`` beyond the largest weight a group gives it."""
        groups = [g for g in self.groups.values() if g is not updated] + ([updated] if updated else [])
        need = max([1] + [g.weights.get(m.id, 0) for g in groups])
        while len(m.handles) > need:
            h = m.handles.pop()
            self._handles.release(h)
            del self.by_handle[h]

    def reset(self) -> None:
        self.members.clear()
        self.groups.clear()
        self.by_handle.clear()
        self._handles = HandleAllocator()
        self._changed()
