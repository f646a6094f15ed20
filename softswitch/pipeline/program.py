"""A loaded P4 program: run-time objects built from BMv2 JSON plus the code generated for it."""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any, Callable

from .. import hashes
from ..runtime.action_profiles import ActionProfile
from ..runtime.stateful import CounterArray, MeterArray, RegisterArray
from ..runtime.tables import ActionSpec, Entry, KeyField, MatchTable
from .action_locals import action_locals
from .codegen import CodeGenerator
from .errors import ProgramError
from .expressions import parse_hexstr
from .layout import build_layout
from .untrusted import MAX_ARRAY_SIZE, json_int, json_width

SUPPORTED_MAJOR_VERSION = 2

# simple_switch's intrinsic fields, by the name simple_switch uses for them.
INTRINSICS = {
    "ingress_port": "standard_metadata.ingress_port",
    "egress_spec": "standard_metadata.egress_spec",
    "egress_port": "standard_metadata.egress_port",
    "instance_type": "standard_metadata.instance_type",
    "packet_length": "standard_metadata.packet_length",
    "parser_error": "standard_metadata.parser_error",
    "checksum_error": "standard_metadata.checksum_error",
    "mcast_grp": "intrinsic_metadata.mcast_grp",
    "egress_rid": "intrinsic_metadata.egress_rid",
    "priority": "intrinsic_metadata.priority",
    "ingress_global_timestamp": "intrinsic_metadata.ingress_global_timestamp",
    "egress_global_timestamp": "intrinsic_metadata.egress_global_timestamp",
    "enq_timestamp": "queueing_metadata.enq_timestamp",
    "enq_qdepth": "queueing_metadata.enq_qdepth",
    "deq_timedelta": "queueing_metadata.deq_timedelta",
    "deq_qdepth": "queueing_metadata.deq_qdepth",
    "qid": "queueing_metadata.qid",
}

# BMv2 const-entry priorities: a lower number wins. P4Runtime's: a higher number wins.
# PI inverts BMv2 priorities around INT32_MAX, so a const entry of JSON priority p reads back
# over P4Runtime with priority INT32_MAX - p on simple_switch_grpc; the same here.
CONST_ENTRY_PRIORITY_BASE = (1 << 31) - 1

TOO_DEEP = "the JSON is nested too deeply for a BMv2 program"


@dataclass(eq=False)
class Calculation:
    name: str
    algorithm: Callable[[bytes], int]
    input_fn: Callable[[list], bytes] | None = None
    direct: Callable[[list], int] | None = None    # generated: the value with no input bytes built


class ParseValueSet:
    """A parser value set; values are kept in BMv2's byte-padded key layout."""

    def __init__(self, name: str, compressed_bitwidth: int, max_size: int = 1024):
        self.name = name
        self.bitwidth = compressed_bitwidth
        self.max_size = max_size
        self.key_widths: list[int] = [compressed_bitwidth]
        self.values: set[int] = set()
        self.mirror: Any = None       # native/objects.py: told every change (None: Python path)

    def set_values(self, values) -> None:
        """The set's members (padded values) from now on."""
        self.values = set(values)
        if self.mirror is not None:
            self.mirror.value_set_changed(self)

    def set_key_widths(self, widths: list[int]) -> None:
        self.key_widths = list(widths)

    def pad(self, compressed: int) -> int:
        """Spread a value given as concatenated key fields into byte-padded key fields."""
        out, shift = 0, sum(self.key_widths)
        for w in self.key_widths:
            shift -= w
            out = (out << ((w + 7) // 8 * 8)) | ((compressed >> shift) & ((1 << w) - 1))
        return out

    def contains(self, key: int, mask: int | None) -> bool:
        if mask is None:
            return key in self.values
        k = key & mask
        return any(v & mask == k for v in self.values)


# The parsed JSON of the programs this process loaded last, by the text's digest: the switches a
# process serves (softswitch group) run the same program, and its parsed JSON is most of what a
# Program holds (about 6 MiB of the fabric program's ~10). Shared, so read-only: nothing that
# walks ``Program.json`` may change it (tests/softswitch/test_program_json_shared.py).
_PARSED: dict[bytes, Any] = {}
_PARSED_KEPT = 4
_parsed_lock = threading.Lock()      # pushes to a group's switches run in parallel


def parsed_json(text: str | bytes) -> Any:
    """``json.loads(text)``, the same object for the same text (see _PARSED)."""
    digest = hashlib.sha256(text.encode() if isinstance(text, str) else text).digest()
    with _parsed_lock:
        found = _PARSED.pop(digest, None)
    if found is None:
        found = json.loads(text)       # outside the lock: a bad text raises here, nothing kept
    with _parsed_lock:
        found = _PARSED.pop(digest, found)     # parsed meanwhile by another push: share that one
        _PARSED[digest] = found                # newest last
        while len(_PARSED) > _PARSED_KEPT:
            del _PARSED[next(iter(_PARSED))]
    return found


class Program:
    """Everything one pipeline needs: layout, tables and externs, and the compiled code."""

    def __init__(self, json_text: str | bytes, fuse: bool = True, with_action_locals: bool = True):
        """``fuse=False`` runs controls node by node (the reference the fused code must match);
        ``with_action_locals=False`` keeps every temporary in the packet state (action_locals.py)."""
        self.fuse = fuse
        self.with_action_locals = with_action_locals
        try:
            js = parsed_json(json_text)
        except (ValueError, UnicodeDecodeError) as e:
            raise ProgramError(f"not valid JSON: {e}") from None
        except RecursionError:
            raise ProgramError(TOO_DEEP) from None
        if not isinstance(js, dict):
            raise ProgramError("not a BMv2 JSON program (top level is not an object)")
        try:
            self._load(js)
        except ProgramError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            raise ProgramError(f"malformed BMv2 JSON: {type(e).__name__}: {e}") from None
        except RecursionError:      # whatever walks the JSON, a deep enough nesting stops it
            raise ProgramError(TOO_DEEP) from None

    def _load(self, js: dict) -> None:
        version = js.get("__meta__", {}).get("version", [SUPPORTED_MAJOR_VERSION, 0])
        if int(version[0]) != SUPPORTED_MAJOR_VERSION:
            raise ProgramError(f"BMv2 JSON version {version[0]}.x is not supported (need 2.x)")
        unsupported = sorted({e.get("type") for e in js.get("extern_instances", [])})
        if unsupported:
            raise ProgramError(f"extern types not supported: {', '.join(map(str, unsupported))}")
        self.json = js
        found = action_locals(js) if self.with_action_locals else {}
        self.layout = build_layout(js, frozenset(f for fields in found.values() for f in fields))
        self.action_locals = found if self.layout.action_locals else {}    # none where the layout kept them all
        self.intrinsics = {k: self.layout.intrinsic(v) for k, v in INTRINSICS.items()}
        for required in ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length"):
            if self.intrinsics[required] is None:
                raise ProgramError(f"the program lacks the field simple_switch needs: {INTRINSICS[required]}")
        self.with_queueing_metadata = all(self.intrinsics[k] is not None for k in
                                          ("enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth"))

        self.actions: dict[int, ActionSpec] = {}
        for a in js.get("actions", []):
            params = tuple((p["name"], json_width(p["bitwidth"], f"action '{a['name']}': width of '{p['name']}'"))
                           for p in a.get("runtime_data", []))
            aid = json_int(a["id"], f"id of action '{a['name']}'")
            self.actions[aid] = ActionSpec(aid, a["name"], params)
        self.counters = {c["name"]: CounterArray(c["name"], _size(c, "counter array"), bool(c.get("is_direct")),
                                                 c.get("binding")) for c in js.get("counter_arrays", [])}
        self.meters = {m["name"]: MeterArray(m["name"], _size(m, "meter array"), m.get("type") == "bytes",
                                             bool(m.get("is_direct")), m.get("binding"), m.get("result_target"))
                       for m in js.get("meter_arrays", [])}
        self.registers = {r["name"]: RegisterArray(r["name"], _size(r, "register array", None),
                                                   json_width(r["bitwidth"], f"width of register array '{r['name']}'"))
                          for r in js.get("register_arrays", [])}
        self.value_sets = {v["name"]: ParseValueSet(v["name"], json_width(v["compressed_bitwidth"],
                                                                          f"width of value set '{v['name']}'"))
                           for v in js.get("parse_vsets", [])}
        self.field_lists = {fl["id"]: tuple(self.layout.field_ref(e["value"])[0]
                                            for e in fl.get("elements", []) if e.get("type") == "field")
                            for fl in js.get("field_lists", [])}
        self.union_siblings = {}
        for u in self.layout.unions.values():
            for h in u.headers:
                self.union_siblings[h.base] = tuple(o.base for o in u.headers if o is not h)

        self.calculations: dict[str, Calculation] = {}
        self.calculation_specs: list[dict] = []
        for c in js.get("calculations", []):
            self._add_calculation(c["name"], c["algo"], c.get("input", []))
        self.action_profiles: dict[str, ActionProfile] = {}
        for pipe in js.get("pipelines", []):
            for ap in pipe.get("action_profiles", []):
                sel = ap.get("selector")
                calc = (self._add_calculation(f"{ap['name']}$selector", sel["algo"], sel["input"])
                        if sel else None)
                self.action_profiles[ap["name"]] = ActionProfile(ap["name"], ap["id"], int(ap.get("max_size", 0)), calc)
        self.tables: dict[str, MatchTable] = {}
        self.table_pipeline: dict[str, str] = {}
        for pipe in js.get("pipelines", []):
            for t in pipe.get("tables", []):
                self.tables[t["name"]] = self._table(t)
                self.table_pipeline[t["name"]] = pipe["name"]

        gen = CodeGenerator(js, self.layout, self, fuse=self.fuse)
        self.source, ns = gen.generate()
        self.namespace = ns              # what the generated code refers to (compiled.py binds it too)
        self.generated_names = gen.defined_names - {"__builtins__"}
        self.compiled = False            # running the compiled functions (use_compiled)
        self.error_codes = gen.errors
        for name, fn_name in gen.calculation_inputs.items():
            self.calculations[name].input_fn = ns[fn_name]
        for name, fn_name in gen.calculation_direct.items():
            self.calculations[name].direct = ns[fn_name]
        for spec in self.actions.values():
            name = gen.action_name(spec.id)
            spec.fn = ns[name] if name is not None else None      # None: nothing to do, never called
        self.parse = ns["parse"]
        self.verify_checksums = ns["verify_checksums"]
        self.update_checksums = ns["update_checksums"]
        self.deparse = ns["deparse"]
        pipelines = {name: ns[fn] for name, fn in gen.pipeline_fns.items()}
        self.ingress = pipelines.get("ingress", _nothing)
        self.egress = pipelines.get("egress", _nothing)
        for t in js.get("pipelines", []):
            for tj in t.get("tables", []):
                self._const_entries(self.tables[tj["name"]], tj)

    # -- construction helpers --------------------------------------------------------------
    def _add_calculation(self, name: str, algo: str, inputs: list) -> Calculation:
        try:
            fn = hashes.get_algorithm(algo)
        except ValueError as e:
            raise ProgramError(f"calculation '{name}': {e}") from None
        calc = Calculation(name, fn)
        self.calculations[name] = calc
        self.calculation_specs.append({"name": name, "input": inputs})
        return calc

    def _action(self, action_id: int, where: str) -> ActionSpec:
        spec = self.actions.get(action_id)
        if spec is None:
            raise ProgramError(f"{where} refers to unknown action id {action_id}")
        return spec

    def _table(self, t: dict) -> MatchTable:
        key = []
        for k in t.get("key", []):
            if k["match_type"] == "valid":
                width = 1
            else:
                _, info, _ = self.layout.field_ref(k["target"])
                width = 1 if info is None else info.width
            name = k.get("name") or (".".join(k["target"]) if isinstance(k["target"], list) else k["target"])
            key.append(KeyField(name, k["match_type"], width))
        actions = [self._action(aid, f"table '{t['name']}'") for aid in t.get("action_ids", [])]
        impl = t.get("type", "simple")
        profile = self.action_profiles.get(t.get("action_profile")) if impl != "simple" else None
        if impl != "simple" and profile is None:
            raise ProgramError(f"table '{t['name']}' uses unknown action profile '{t.get('action_profile')}'")
        meter = self.meters.get(t["direct_meters"]) if t.get("direct_meters") else None
        table = MatchTable(t["name"], t["id"], key, actions, t.get("match_type", "exact"),
                           int(t.get("max_size", 1024)), impl, profile, bool(t.get("with_counters")), meter)
        de = t.get("default_entry")
        if de:
            spec = self._action(de["action_id"], f"default entry of table '{t['name']}'")
            data = tuple(parse_hexstr(d) for d in de.get("action_data", []))
            table.default_action, table.default_data = spec, data
            table.initial_default = (spec, data)
            table.default_const = bool(de.get("action_const"))
        return table

    def _const_entries(self, table: MatchTable, t: dict) -> None:
        entries = t.get("entries")
        if not entries:
            return
        for e in entries:
            match = []
            for k, m in zip(table.key, e["match_key"]):
                mt = m["match_type"]
                if mt in ("exact", "valid"):
                    match.append(int(m["key"]) if mt == "valid" else parse_hexstr(m["key"]))
                elif mt == "lpm":
                    match.append((parse_hexstr(m["key"]), int(m["prefix_length"])))
                elif mt in ("ternary", "optional"):
                    mask = parse_hexstr(m["mask"]) if "mask" in m else (1 << k.width) - 1
                    match.append((parse_hexstr(m["key"]) & mask, mask))
                elif mt == "range":
                    match.append((parse_hexstr(m["start"]), parse_hexstr(m["end"])))
                else:
                    raise ProgramError(f"table '{table.name}': const entry with match type '{mt}'")
            ae = e["action_entry"]
            spec = self._action(ae["action_id"], f"const entry of table '{table.name}'")
            data = tuple(parse_hexstr(d) for d in ae.get("action_data", []))
            prio = CONST_ENTRY_PRIORITY_BASE - int(e.get("priority", 0)) if table.needs_priority else 0
            table.insert(Entry(tuple(match), prio, spec, data))
        table.immutable = True

    def use_compiled(self, functions: dict[str, Callable]) -> None:
        """Run ``functions`` (this program's generated code compiled, by name: compiled.py)
        instead of the generated Python from now on. Whoever runs the program holds it still."""
        def compiled(fn: Callable) -> Callable:
            return functions.get(fn.__name__, fn) if fn is not None and fn is not _nothing else fn

        for name in ("parse", "verify_checksums", "update_checksums", "deparse", "ingress", "egress"):
            setattr(self, name, compiled(getattr(self, name)))
        for spec in self.actions.values():
            spec.fn = compiled(spec.fn)
        for calc in self.calculations.values():
            calc.input_fn, calc.direct = compiled(calc.input_fn), compiled(calc.direct)
        self.compiled = True

    # -- run-time state --------------------------------------------------------------------
    def new_packet_state(self) -> list:
        return self.layout.template[:]


def _nothing(F: list) -> None:
    return None


def _size(spec: dict, kind: str, default: int | None = 0) -> int:
    """The checked ``size`` of a counter, meter or register array (``default`` if optional)."""
    size = spec["size"] if default is None else spec.get("size", default)
    return json_int(size, f"size of {kind} '{spec['name']}'", 0, MAX_ARRAY_SIZE)
