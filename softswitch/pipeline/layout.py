"""Where every header, field and hidden per-packet register lives in a packet's state.

A packet's whole state (BMv2's PHV plus its packet registers) is one flat Python list of
ints, ``F``. Copying a packet for a clone or a multicast replica is then ``F[:]`` and the
generated code reads a field as ``F[17]``. Each header instance occupies a contiguous run:

    F[base]             valid bit (metadata headers are always valid)
    F[base + 1 + k]     value of field k (signed fields hold negative values as BMv2 does)
    F[base + 1 + n]     current bit width of the variable-length field, if the type has one

Header stacks and union stacks add one slot each, their ``next`` index. After all headers
come the hidden registers simple_switch keeps per packet (clone session, resubmit and
recirculate field lists, packet length, truncation length).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from .action_locals import LOCALS_INSTANCE
from .errors import ProgramError
from .untrusted import MAX_BITWIDTH, json_int


@dataclass(frozen=True)
class FieldInfo:
    name: str
    width: int | None        # None for the variable-length field
    signed: bool
    index: int               # position within the header type


@dataclass(frozen=True)
class HeaderType:
    name: str
    fields: tuple[FieldInfo, ...]
    varbit: FieldInfo | None
    max_length: int | None   # bytes, only for types with a varbit field

    @property
    def fixed_bits(self) -> int:
        return sum(f.width for f in self.fields if f.width is not None)

    @property
    def slots(self) -> int:
        return 1 + len(self.fields) + (1 if self.varbit else 0)

    @cached_property
    def _by_name(self) -> dict[str, FieldInfo]:
        # the first of a repeated name, as a scan would find (p4c's scalars type has 540 fields)
        by_name: dict[str, FieldInfo] = {}
        for f in self.fields:
            by_name.setdefault(f.name, f)
        return by_name

    def field(self, name: str) -> FieldInfo:
        try:
            return self._by_name[name]
        except (KeyError, TypeError):
            raise ProgramError(f"header type '{self.name}' has no field '{name}'") from None


@dataclass(frozen=True)
class HeaderInstance:
    name: str
    id: int
    type: HeaderType
    metadata: bool
    base: int

    def slot(self, field_name: str) -> int:
        if field_name == "$valid$":
            return self.base
        return self.base + 1 + self.type.field(field_name).index

    @property
    def varbit_len_slot(self) -> int:
        return self.base + 1 + len(self.type.fields)


@dataclass(frozen=True)
class HeaderStack:
    name: str
    id: int
    headers: tuple[HeaderInstance, ...]
    next_slot: int


@dataclass(frozen=True)
class HeaderUnion:
    name: str
    id: int
    headers: tuple[HeaderInstance, ...]


@dataclass(frozen=True)
class UnionStack:
    name: str
    id: int
    unions: tuple[HeaderUnion, ...]
    next_slot: int


# Hidden per-packet registers, in the order they follow the headers.
# ``ingress_length`` is the length the packet had when it entered (counters and meters count
# it, as BMv2's do); ``payload`` holds the bytes the parser did not consume.
HIDDEN_REGISTERS = ("clone_session", "clone_field_list", "resubmit_field_list",
                    "recirculate_field_list", "packet_length", "truncate_length",
                    "learn_id", "ingress_length", "payload")


@dataclass
class Layout:
    header_types: dict[str, HeaderType] = field(default_factory=dict)
    headers: dict[str, HeaderInstance] = field(default_factory=dict)
    headers_by_id: dict[int, HeaderInstance] = field(default_factory=dict)
    stacks: dict[str, HeaderStack] = field(default_factory=dict)
    unions: dict[str, HeaderUnion] = field(default_factory=dict)
    union_stacks: dict[str, UnionStack] = field(default_factory=dict)
    aliases: dict[str, tuple[str, str]] = field(default_factory=dict)
    hidden: dict[str, int] = field(default_factory=dict)
    size: int = 0
    template: list[int] = field(default_factory=list)
    metadata_slots: list[int] = field(default_factory=list)
    # fields of action_locals.LOCALS_INSTANCE kept in action locals, not slots (action_locals.py)
    action_locals: dict[str, FieldInfo] = field(default_factory=dict)

    # -- lookups used by the code generator -------------------------------------------
    def header(self, name: str) -> HeaderInstance:
        try:
            return self.headers[name]
        except KeyError:
            raise ProgramError(f"unknown header instance '{name}'") from None

    def field_ref(self, ref: list | tuple) -> tuple[int, FieldInfo | None, HeaderInstance]:
        """Slot, field info (None for $valid$) and header of a ``[header, field]`` reference."""
        if not isinstance(ref, (list, tuple)) or len(ref) != 2:
            raise ProgramError(f"bad field reference {ref!r}")
        hdr = self.header(ref[0])
        if ref[1] == "$valid$":
            return hdr.base, None, hdr
        info = hdr.type.field(ref[1])
        return hdr.base + 1 + info.index, info, hdr

    def stack(self, name: str) -> HeaderStack:
        try:
            return self.stacks[name]
        except KeyError:
            raise ProgramError(f"unknown header stack '{name}'") from None

    def union(self, name: str) -> HeaderUnion:
        try:
            return self.unions[name]
        except KeyError:
            raise ProgramError(f"unknown header union '{name}'") from None

    def union_stack(self, name: str) -> UnionStack:
        try:
            return self.union_stacks[name]
        except KeyError:
            raise ProgramError(f"unknown header union stack '{name}'") from None

    def intrinsic(self, name: str) -> int | None:
        """Slot of a field simple_switch knows by name (``standard_metadata.egress_spec``,
        ``queueing_metadata.enq_qdepth``...), through the JSON's field aliases; None if the
        program does not have it."""
        found = self._intrinsic_field(name)
        return found[0] if found else None

    def intrinsic_mask(self, name: str) -> int | None:
        """All ones in the width of that field (what simple_switch truncates a value it sets to)."""
        found = self._intrinsic_field(name)
        return (1 << found[1].width) - 1 if found and found[1].width else None

    def _intrinsic_field(self, name: str) -> tuple[int, FieldInfo] | None:
        hdr_name, _, fld = name.partition(".")
        if name in self.aliases:
            hdr_name, fld = self.aliases[name]
        hdr = self.headers.get(hdr_name)
        if hdr is None:
            return None
        for f in hdr.type.fields:
            if f.name == fld:
                return hdr.base + 1 + f.index, f
        return None


def _header_type(js: dict) -> HeaderType:
    fields = []
    varbit = None
    for i, spec in enumerate(js["fields"]):
        name, width = spec[0], spec[1]
        signed = bool(spec[2]) if len(spec) > 2 else False
        if width == "*":
            info = FieldInfo(name, None, False, i)
            if varbit is not None:
                raise ProgramError(f"header type '{js['name']}' has two variable-length fields")
            varbit = info
        elif type(width) is int and 0 < width <= MAX_BITWIDTH:
            info = FieldInfo(name, width, signed, i)
        else:
            raise ProgramError(f"field '{name}' of header type '{js['name']}' has bad width {width!r}")
        fields.append(info)
    max_length = js.get("max_length")
    if max_length is not None:
        max_length = json_int(max_length, f"max_length of header type '{js['name']}'", 0)
    return HeaderType(js["name"], tuple(fields), varbit, max_length)


def _without(t: HeaderType, names: frozenset[str]) -> tuple[HeaderType, dict[str, FieldInfo]]:
    """``t`` less the fields ``names`` (the rest renumbered), and the infos of those taken out."""
    kept = [f for f in t.fields if f.name not in names]
    renumbered = tuple(FieldInfo(f.name, f.width, f.signed, i) for i, f in enumerate(kept))
    return HeaderType(t.name, renumbered, t.varbit, t.max_length), {f.name: f for f in t.fields if f.name in names}


def build_layout(js: dict, local_fields: frozenset[str] = frozenset()) -> Layout:
    """Assign slots to everything in a BMv2 JSON program; ``local_fields`` of the instance
    ``LOCALS_INSTANCE`` get none (they are action locals)."""
    lay = Layout()
    for ht in js.get("header_types", []):
        t = _header_type(ht)
        lay.header_types[t.name] = t

    slot = 0
    for h in js.get("headers", []):
        t = lay.header_types.get(h["header_type"])
        if t is None:
            raise ProgramError(f"header '{h['name']}' has unknown type '{h['header_type']}'")
        if h["name"] == LOCALS_INSTANCE and local_fields and t.varbit is None:
            t, lay.action_locals = _without(t, local_fields)
        inst = HeaderInstance(h["name"], h["id"], t, bool(h.get("metadata")), slot)
        lay.headers[inst.name] = inst
        lay.headers_by_id[inst.id] = inst
        slot += t.slots

    def by_ids(ids: list[int], what: str) -> tuple[HeaderInstance, ...]:
        try:
            return tuple(lay.headers_by_id[i] for i in ids)
        except KeyError as e:
            raise ProgramError(f"{what} refers to unknown header id {e.args[0]}") from None

    for s in js.get("header_stacks", []):
        lay.stacks[s["name"]] = HeaderStack(s["name"], s["id"], by_ids(s["header_ids"], s["name"]), slot)
        slot += 1
    unions_by_id = {}
    for u in js.get("header_unions", []):
        un = HeaderUnion(u["name"], u["id"], by_ids(u["header_ids"], u["name"]))
        lay.unions[un.name] = un
        unions_by_id[un.id] = un
    for us in js.get("header_union_stacks", []):
        members = tuple(unions_by_id[i] for i in us["header_union_ids"])
        lay.union_stacks[us["name"]] = UnionStack(us["name"], us["id"], members, slot)
        slot += 1
    for name in HIDDEN_REGISTERS:
        lay.hidden[name] = slot
        slot += 1

    lay.aliases = {a[0]: (a[1][0], a[1][1]) for a in js.get("field_aliases", [])}
    lay.size = slot
    lay.template = [0] * slot
    for inst in lay.headers.values():
        if inst.metadata:
            lay.template[inst.base] = 1
            lay.metadata_slots.extend(range(inst.base + 1, inst.base + inst.type.slots))
    return lay
