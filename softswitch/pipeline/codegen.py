"""Generate one Python module from a BMv2 JSON program.

Everything per packet is plain generated code: parser states, actions, control-flow nodes,
the deparser and checksums. Run-time objects (tables, registers, calculations...) are bound
into the module's namespace under generated names, so the code calls them directly. The
generated source is kept (``Program.source``) so it can be read when something looks wrong.

The JSON is untrusted input: every identifier in the source is made here (a prefix and a
counter), names appear only as `comment` text, numbers only after `json_int` (see untrusted.py).
"""
from __future__ import annotations

from typing import Any

from ..hashes import csum16
from ..runtime.action_profiles import ActionProfile
from ..runtime.tables import EXACT, NOT_CACHED
from . import header_codec
from .controlflow import Block, Structurer, post_dominators
from .errors import ProgramError
from .expressions import RUNTIME_HELPERS, TARGET_WRITTEN_HEADERS, ExpressionCompiler, parse_hexstr
from .helpers import BASE_NAMESPACE
from .layout import HeaderInstance, HeaderType, Layout
from .primitives import PrimitiveCompiler, is_jump, jump_target
from .untrusted import comment, json_int, json_width

CORE_ERRORS = ("NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort",
               "ParserTimeout", "ParserInvalidArgument")


class Source:
    """Lines of Python with indentation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str = "") -> None:
        self.lines.append("    " * self.depth + line if line else "")

    def block(self, lines: list[str]) -> None:
        for ln in lines:
            self(ln)

    def indent(self) -> "Source":
        self.depth += 1
        return self

    def dedent(self) -> None:
        self.depth -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _mask(width: int) -> str:
    return f"{(1 << width) - 1:#x}"


# An action keeps up to this many temporaries in local variables, more in a list of its own:
# gcc's time and memory on a function grow steeply with its C variables (the aggregation
# action's 318 as locals took the fabric program's build past 8 minutes and 3.4 GB).
MAX_LOCAL_VARIABLES = 16
# A longer action is called, not copied into its table's code and into the structured control
# (the aggregation action's ~1,000 lines were there three times). Measured together with the
# locals above: the fabric program's compiled build 164 -> 123 s and 1.9 -> 1.7 GB.
MAX_INLINE_LINES = 64


class CodeGenerator:
    def __init__(self, js: dict, layout: Layout, objects: Any, fuse: bool = True):
        self.js = js
        self.fuse = fuse                               # pipelines as structured functions
        self.layout = layout
        self.obj = objects
        self.ns: dict[str, Any] = dict(BASE_NAMESPACE)
        self.ns.update(RUNTIME_HELPERS)
        self._bound: dict[int, str] = {}
        self.out = Source()
        self.ec = ExpressionCompiler(layout, self.bind, objects.registers)
        self.pc = PrimitiveCompiler(layout, self.ec, objects, self.calculation_output)
        self.errors = self._error_codes()
        self._deferred_next: list[tuple[str, dict]] = []
        self._serial: dict[str, int] = {}
        self._action_fns: dict[int, str] = {}          # action id -> function
        self._empty_actions: set[int] = set()          # ids of actions with no primitives: no function
        self._action_bodies: dict[int, list[str]] = {}  # action id -> its lines, when they inline
        self._state_fns: dict[str, str] = {}           # parser state name -> function
        self._structs: dict[str, str] = {}             # header type name -> its bound struct.Struct
        self.calculation_inputs: dict[str, str] = {}   # calculation name -> input function
        self.calculation_direct: dict[str, str] = {}   # calculation name -> value function (csum16)
        self.pipeline_fns: dict[str, str] = {}         # pipeline name -> function
        self.defined_names: frozenset[str] = frozenset()   # set by generate()

    # -- namespace -----------------------------------------------------------------------
    def _ident(self, prefix: str) -> str:
        """A fresh identifier for generated source (never derived from the JSON)."""
        n = self._serial.get(prefix, 0)
        self._serial[prefix] = n + 1
        return f"{prefix}{n}"

    def bind(self, obj: Any) -> str:
        key = id(obj)
        name = self._bound.get(key)
        if name is None:
            name = f"_o{len(self._bound)}"
            self._bound[key] = name
            self.ns[name] = obj
        return name

    def _error_codes(self) -> dict[str, int]:
        return error_codes(self.js)

    # -- whole module --------------------------------------------------------------------
    def generate(self) -> tuple[str, dict[str, Any]]:
        if self.obj.union_siblings:
            sib = self.obj.union_siblings
            self.ns["_set_valid"] = lambda F, b: _set_valid_union(F, b, sib)
        for calc in self.obj.calculation_specs:
            self.calculation_inputs[calc["name"]] = self.calculation_input(calc)
        self._actions()
        self._parsers()
        self._checksums()
        self._deparser()
        for pipe in self.js.get("pipelines", []):
            self._pipeline(pipe)
        self._finish_next_maps()
        src = self.out.text()
        try:
            code = compile(src, "<softswitch pipeline>", "exec")
        except SyntaxError as e:  # a bug in the generator, never the user's
            raise ProgramError(f"internal error: generated code does not compile: {e}") from e
        bound = set(self.ns)
        exec(code, self.ns)
        self.defined_names = frozenset(self.ns) - bound      # what the generated module defines
        return src, self.ns

    # -- actions -------------------------------------------------------------------------
    def action_name(self, action_id: int) -> str | None:
        """The generated function of the action with this JSON id; None for an action with
        nothing to do (no primitives): it has no function, and a table that picks it calls
        none (``_run_action``), a call less for each such table a packet crosses."""
        if action_id in self._empty_actions:
            return None
        try:
            return self._action_fns[action_id]
        except (KeyError, TypeError):
            raise ProgramError(f"unknown action id {comment(action_id)}") from None

    def _actions(self) -> None:
        for a in self.js.get("actions", []):
            aid = json_int(a["id"], f"id of action '{a['name']}'")
            if not a.get("primitives"):
                self._empty_actions.add(aid)
                self._action_bodies[aid] = []
                continue
            self._action_fns[aid] = self._ident("_a")
            self._action(a, aid, self._action_fns[aid])

    def _action(self, a: dict, aid: int, fn: str) -> None:
        o = self.out
        prims = a.get("primitives", [])
        o(f"def {fn}(F, D):  # {comment(a['name'])}")
        o.indent()
        # its temporaries out of the packet state, starting at metadata's 0 (action_locals.py)
        fields = self.obj.action_locals.get(aid, ())
        if len(fields) <= MAX_LOCAL_VARIABLES:
            self.ec.locals = {f: self._ident("_lv") for f in fields}
            start = [f"{v} = 0" for v in self.ec.locals.values()]
        else:
            self.ec.locals = {f: f"_L[{i}]" for i, f in enumerate(fields)}
            start = [f"_L = [0] * {len(fields)}"]
        try:
            if any(is_jump(p) for p in prims):
                o.block(start)
                self._action_with_jumps(prims)
            else:
                body = start + [ln for p in prims for ln in self.pc.compile(p)]
                o.block(body)
                self._action_bodies[aid] = body
        finally:
            self.ec.locals = {}
        o.dedent()
        o()

    def _action_with_jumps(self, prims: list[dict]) -> None:
        """Actions with ``_jump``/``_jump_if_zero`` run as a small program counter loop."""
        o = self.out
        end = len(prims)
        o("pc = 0")
        o(f"while pc < {end}:")
        o.indent()
        for i, p in enumerate(prims):
            o(f"{'if' if i == 0 else 'elif'} pc == {i}:")
            o.indent()
            if is_jump(p):
                cond, target = jump_target(p, self.ec)
                if cond is None:
                    o(f"pc = {target}")
                else:
                    o(f"pc = {target} if ({cond}) == 0 else {i + 1}")
            else:
                o.block(self.pc.compile(p))
                o(f"pc = {i + 1}")
            o.dedent()
        o.dedent()

    # -- parser --------------------------------------------------------------------------
    def _parsers(self) -> None:
        parsers = self.js.get("parsers", [])
        if not parsers:
            raise ProgramError("the program has no parser")
        parser = next((p for p in parsers if p["name"] == "parser"), parsers[0])
        states = {s["name"]: s for s in parser.get("parse_states", [])}
        self._state_fns = {name: self._ident("_ps") for name in states}
        for s in states.values():
            self._parse_state(s)
        o = self.out
        err_slot = self.layout.intrinsic("standard_metadata.parser_error")
        init = parser.get("init_state")
        o("def parse(F, pkt):")
        o.indent()
        o('"""Run the parser; returns how many bytes it consumed."""')
        o(f"st = {self._state_fn(init)}")
        o("o = 0")
        o("try:")
        o("    while st is not None:")
        o("        st, o = st(F, pkt, o)")
        o("except _PErr as e:")
        o(f"    F[{err_slot}] = e.code" if err_slot is not None else "    pass")
        o("    o = e.offset")
        o("return o")
        o.dedent()
        o()

    def _state_fn(self, name: str | None) -> str:
        if name is None:
            return "None"
        if name not in self._state_fns:
            raise ProgramError(f"parser refers to unknown state '{name}'")
        return self._state_fns[name]

    def _parse_state(self, s: dict) -> None:
        o = self.out
        o(f"def {self._state_fn(s['name'])}(F, pkt, o):  # {comment(s['name'])}")
        o.indent()
        # BMv2 keeps what the state consumed before an operation failed (pkt->remove of
        # bytes_parsed): the error carries the offset reached
        o("try:")
        o.indent()
        for op in s.get("parser_ops", []):
            self._parser_op(op)
        self._transition(s)
        o.dedent()
        o("except _PErr as e:")
        o("    e.offset = o")
        o("    raise")
        o.dedent()
        o()

    def _too_short(self, nbytes_src: str) -> str:
        return f"if len(pkt) - o < {nbytes_src}: raise _PErr({self.errors['PacketTooShort']})"

    def _parser_op(self, op: dict) -> None:
        o = self.out
        kind, params = op.get("op"), op.get("parameters", [])
        if kind == "extract":
            self._extract(params[0], None)
        elif kind == "extract_VL":
            self._extract(params[0], self.ec.data(params[1]))
        elif kind == "set":
            dst = self.pc.lvalue(params[0])
            src = params[1]
            if src.get("type") == "lookahead":
                o.block(self._lookahead_lines(*lookahead_args(src["value"]), "_v"))
                o(dst.store("_v"))
            else:
                o(dst.assign(self.ec.value(src)))
        elif kind == "verify":
            o(f"if not {self.ec.boolean(params[0])}: raise _PErr({self.ec.data(params[1])})")
        elif kind in ("shift", "advance"):
            amount = self.ec.data(params[0])
            nbytes = amount if kind == "shift" else "_n"
            if kind == "advance":
                o(f"_bits = {amount}")
                o(f"if _bits % 8: raise _PErr({self.errors['ParserInvalidArgument']})")
                o("_n = _bits // 8")
            o(self._too_short(nbytes))
            o(f"o += {nbytes}")
        elif kind == "primitive":
            o.block(self.pc.compile(params[0]))
        else:
            raise ProgramError(f"unsupported parser operation '{kind}'")

    def _extract(self, target: dict, vl_bits_src: str | None) -> None:
        o = self.out
        t, v = target.get("type"), target.get("value")
        if t == "regular":
            hdr = self.layout.header(v)
            self._extract_into(str(hdr.base), hdr.type, vl_bits_src)
            o.block(self.pc._set_valid(str(hdr.base)))
            return
        if t == "stack":
            st = self.layout.stack(v)
            bases = self.bind(tuple(h.base for h in st.headers))
            htype = st.headers[0].type
        elif t == "union_stack":
            st = self.layout.union_stack(v[0])
            # union members are named in the union type; their position picks the header
            idx = self._union_member_index(st, v[1])
            bases = self.bind(tuple(u.headers[idx].base for u in st.unions))
            htype = st.unions[0].headers[idx].type
        else:
            raise ProgramError(f"unsupported extract target type '{t}'")
        o(f"if F[{st.next_slot}] >= {len(self.ns[bases])}: "
          f"raise _PErr({self.errors['StackOutOfBounds']})")
        o(f"_b = {bases}[F[{st.next_slot}]]")
        self._extract_into("_b", htype, vl_bits_src)
        o.block(self.pc._set_valid("_b"))
        o(f"F[{st.next_slot}] += 1")

    def _union_member_index(self, ust, member_name: str) -> int:
        utype_name = next((u["union_type"] for u in self.js.get("header_unions", [])
                           if u["name"] == ust.unions[0].name), None)
        utype = next((t for t in self.js.get("header_union_types", []) if t["name"] == utype_name), None)
        if utype is None:
            raise ProgramError(f"header union '{ust.unions[0].name}' has no known union type")
        names = [m[0] for m in utype["headers"]]
        if member_name not in names:
            raise ProgramError(f"union stack '{ust.name}' has no member '{member_name}'")
        return names.index(member_name)

    def _extract_into(self, base: str, htype: HeaderType, vl_bits_src: str | None) -> None:
        """Lines that read a header of ``htype`` at ``o`` into slots starting at ``base``."""
        o = self.out
        if htype.varbit is not None:
            if vl_bits_src is None:
                raise ProgramError(f"header type '{htype.name}' has a varbit field: extract_VL needed")
            max_bytes = htype.max_length or 0       # checked by the layout
            o(f"o = _extract_vl(F, {base}, {self.bind(htype)}, pkt, o, {vl_bits_src}, "
              f"{max_bytes}, {self.bind(self.errors)})")
            self.ns["_extract_vl"] = extract_varbit
            return
        nbytes = htype.fixed_bits // 8
        if htype.fixed_bits % 8:
            raise ProgramError(f"header type '{htype.name}' is not a whole number of bytes")
        o(self._too_short(str(nbytes)))
        o.block(header_codec.extract_lines(htype, lambda i: _slot(base, 1 + i), self._struct(htype)))
        o(f"o += {nbytes}")

    def _struct(self, htype: HeaderType) -> str:
        """The name of the header type's struct.Struct (header_codec.py), bound once."""
        if htype.name not in self._structs:
            self._structs[htype.name] = self.bind(header_codec.header_struct(htype))
        return self._structs[htype.name]

    def _lookahead_lines(self, bit_offset: int, width: int, var: str) -> list[str]:
        nbytes = (bit_offset + width + 7) // 8
        tail = nbytes * 8 - bit_offset - width
        return [self._too_short(str(nbytes)),
                f"{var} = (int.from_bytes(pkt[o:o + {nbytes}], 'big') >> {tail}) & {_mask(width)}"]

    def _transition(self, s: dict) -> None:
        o = self.out
        transitions = s.get("transitions", [])
        keys = s.get("transition_key", [])
        default = "None"
        cases = []
        for t in transitions:
            nxt = self._state_fn(t.get("next_state"))
            if "type" not in t:   # older JSON: no type, the value says "default"
                t = dict(t, type="default" if t.get("value") == "default" else "hexstr")
            if t["type"] == "default":
                default = nxt
            else:
                cases.append((t, nxt))
        if not cases:
            o(f"return {default}, o")
            return
        parts, widths = [], []
        for k in keys:
            src, width = self._transition_key_part(k)
            parts.append(src)
            widths.append(width)
        # BMv2 builds the key from byte-padded parts, so values and masks are byte-padded too
        key = parts[0]
        for src, width in zip(parts[1:], widths[1:]):
            key = f"(({key}) << {((width + 7) // 8) * 8}) | {src}"
        o(f"_k = {key}")
        for t, nxt in cases:
            if t["type"] == "hexstr":
                value = parse_hexstr(t["value"])
                if t.get("mask"):
                    m = parse_hexstr(t["mask"])
                    o(f"if _k & {m:#x} == {value & m:#x}: return {nxt}, o")
                else:
                    o(f"if _k == {value:#x}: return {nxt}, o")
            elif t["type"] == "parse_vset":
                vs = self.obj.value_sets.get(t["value"])
                if vs is None:
                    raise ProgramError(f"unknown parse value set '{t['value']}'")
                vs.set_key_widths(widths)
                m = parse_hexstr(t["mask"]) if t.get("mask") else None
                o(f"if {self.bind(vs)}.contains(_k, {m}): return {nxt}, o")
            else:
                raise ProgramError(f"unsupported transition type '{t['type']}'")
        o(f"return {default}, o")

    def _transition_key_part(self, k: dict) -> tuple[str, int]:
        t, v = k.get("type"), k.get("value")
        if t == "field":
            return self._field_in_width(v)
        if t == "stack_field":
            st = self.layout.stack(v[0])
            info = st.headers[0].type.field(v[1])
            return f"({self.ec._stack_last_field(v[0], v[1])} & {_mask(info.width)})", info.width
        if t == "union_stack_field":
            ust = self.layout.union_stack(v[0])
            idx = self._union_member_index(ust, v[1])
            info = ust.unions[0].headers[idx].type.field(v[2])
            bases = self.bind(tuple(u.headers[idx].base for u in ust.unions))
            return f"(F[{bases}[F[{ust.next_slot}] - 1] + {1 + info.index}] & {_mask(info.width)})", info.width
        if t == "lookahead":
            off, width = lookahead_args(v)
            nbytes = (off + width + 7) // 8
            tail = nbytes * 8 - off - width
            # BMv2 reads past the end of a short packet here; missing bytes read as zero
            return (f"((int.from_bytes(pkt[o:o + {nbytes}].ljust({nbytes}, b'\\0'), 'big') >> {tail})"
                    f" & {_mask(width)})"), width
        if t == "expression":
            return self.ec.data(v), 32
        raise ProgramError(f"unsupported transition key type '{t}'")

    def _field_in_width(self, ref: list) -> tuple[str, int]:
        """(source, width) of a field's value, masked to its width unless its slot only ever
        holds values that fit (expressions.Compiled.bits)."""
        _, info, _ = self.layout.field_ref(ref)
        width = 1 if info is None else info.width
        value = self.ec.value({"type": "field", "value": ref})
        if value.bits is not None and value.bits <= width:
            return value.src, width
        return f"({value.src} & {_mask(width)})", width

    # -- checksums and calculations ------------------------------------------------------
    def calculation_input(self, calc: dict) -> str:
        """Define a function building a calculation's input bytes; returns its name.

        BMv2 packs the inputs MSB first and skips the fields of invalid headers, so fields
        are grouped into runs that share one validity check; a run of metadata or constants
        needs none, and an input with no checks at all packs to a fixed size. A whole header
        or a varbit field (at its current width, as BMv2 packs it) is a run of its own."""
        name = self._ident("_ci")
        runs: list[tuple[int | None, list[tuple[str, int]]]] = []   # (guard slot, [(src, width)])
        headers: list[tuple[int, HeaderInstance]] = []               # whole-header and varbit runs' headers
        payload = False
        for item in calc.get("input", []):
            t, v = item.get("type"), item.get("value")
            if t == "field":
                slot, info, hdr = self.layout.field_ref(v)
                if info is not None and info.width is None:
                    headers.append((len(runs), hdr))
                    runs.append((_VARBIT_RUN, []))
                    continue
                guard = None if hdr.metadata else hdr.base
                part = self._field_in_width(v)
            elif t == "hexstr":
                width = json_width(item["bitwidth"], f"calculation '{calc['name']}': bitwidth of a constant")
                guard, part = None, (f"{parse_hexstr(v) & ((1 << width) - 1):#x}", width)
            elif t == "header":
                headers.append((len(runs), self.layout.header(v)))
                runs.append((_HEADER_RUN, []))
                continue
            elif t == "payload":
                payload = True
                continue
            else:
                raise ProgramError(f"calculation '{calc['name']}': unsupported input type '{t}'")
            if runs and runs[-1][0] == guard:
                runs[-1][1].append(part)
            else:
                runs.append((guard, [part]))
        tail = f" + F[{self.layout.hidden['payload']}]" if payload else ""
        run_headers = dict(headers)
        if all(g is None for g, _ in runs):
            total = sum(w for _, parts in runs for _, w in parts)
            body = [f"_x = {_concat([p for _, parts in runs for p in parts]) if total else '0'}"]
            nbits = str(total)
        else:
            body = ["_x = 0", "_n = 0"]
            for i, (guard, parts) in enumerate(runs):
                if guard == _HEADER_RUN:
                    body += self._whole_header_input(run_headers[i],
                                                     "_x = (_x << (8 * len(_h))) | int.from_bytes(_h, 'big')")
                    continue
                if guard == _VARBIT_RUN:
                    body += self._varbit_input(run_headers[i], "_x = (_x << _w) | _v")
                    continue
                total = sum(w for _, w in parts)
                line = f"_x = (_x << {total}) | {_concat(parts)}; _n += {total}"
                body.append(f"if F[{guard}]: {line}" if guard is not None else line)
            nbits = "_n"
        o = self.out
        o(f"def {name}(F):  # {comment(calc['name'])}")
        o.indent()
        o.block(body)
        if nbits.isdigit():      # no header validity in the input: the size is known now
            pad = -int(nbits) % 8
            o(f"return (_x << {pad}).to_bytes({(int(nbits) + pad) // 8}, 'big'){tail}")
        else:
            o(f"_pad = -{nbits} % 8")
            o(f"return (_x << _pad).to_bytes(({nbits} + _pad) // 8, 'big'){tail}")
        o.dedent()
        o()
        if not payload and self.obj.calculations[calc["name"]].algorithm is csum16:
            self.calculation_direct[calc["name"]] = self._csum16_direct(calc["name"], runs, run_headers)
        return name

    def _whole_header_input(self, hdr: HeaderInstance, append: str) -> list[str]:
        """Lines adding a whole header (if valid) to a calculation's input with ``append``,
        which reads its bytes from ``_h``."""
        self.ns["_pack_header"] = pack_header
        return [f"if F[{hdr.base}]:",
                f"    _h = _pack_header(F, {hdr.base}, {self.bind(hdr.type)})",
                f"    {append}; _n += 8 * len(_h)"]

    def _varbit_input(self, hdr: HeaderInstance, append: str) -> list[str]:
        """Lines adding a header's varbit field (if the header is valid) at its current width
        to a calculation's input with ``append``, which reads the value from ``_v`` and the
        width from ``_w`` (layout: the width is kept in the slot after the header's fields)."""
        value = hdr.base + 1 + hdr.type.varbit.index
        return [f"if F[{hdr.base}]:",
                f"    _w = F[{hdr.varbit_len_slot}]; _v = F[{value}] & ((1 << _w) - 1)",
                f"    {append}; _n += _w"]

    def _csum16_direct(self, calc_name: str, runs: list, run_headers: dict) -> str:
        """csum16 of a calculation straight from its fields, with no bytes in between.

        hashes.csum16 reads the input bytes as one big-endian number X (bits padded to a
        multiple of 16) and, as 2**16 = 1 modulo 0xFFFF, its sum of 16-bit words is X modulo
        0xFFFF. So each field counts shifted only by its bit position modulo 16: the sum of
        those small terms has X's residue, and is 0 exactly when X is (no term is negative).
        That spares building X, an integer of the input's whole width, a shift at a time."""
        name = self._ident("_ck")
        body = ["_x = 0", "_n = 0"]
        for i, (guard, parts) in enumerate(runs):
            if guard == _HEADER_RUN:
                body += self._whole_header_input(
                    run_headers[i], "_x = (_x << (8 * len(_h) % 16)) + int.from_bytes(_h, 'big')")
                continue
            if guard == _VARBIT_RUN:
                body += self._varbit_input(run_headers[i], "_x = (_x << (_w % 16)) + _v")
                continue
            total = sum(w for _, w in parts)
            shifted = f"(_x << {total % 16}) + " if total % 16 else "_x + "
            line = f"_x = {shifted}{_modular_sum(parts)}; _n += {total}"
            body.append(f"if F[{guard}]: {line}" if guard is not None else line)
        o = self.out
        o(f"def {name}(F):  # {comment(calc_name)}, csum16")
        o.indent()
        o.block(body)
        o("if not _x:")
        o("    return 0xFFFF")
        o("_s = (_x << (-_n % 16)) % 0xFFFF")
        o("return 0xFFFF - _s if _s else 0")
        o.dedent()
        o()
        return name

    def calculation_output(self, calc_name: str) -> str:
        """Source of a calculation's value for the packet in ``F``."""
        direct = self.calculation_direct.get(calc_name)
        if direct is not None:
            return f"{direct}(F)"
        calc = self.obj.calculations[calc_name]     # its algorithm is never replaced: bound
        return f"{self.bind(calc.algorithm)}({self.calculation_inputs[calc_name]}(F))"

    def _checksums(self) -> None:
        o = self.out
        verify, update = [], []
        for ck in self.js.get("checksums", []):
            if ck.get("type", "generic") != "generic":
                raise ProgramError(f"checksum '{ck['name']}': type '{ck.get('type')}' is not supported")
            calc = self.obj.calculations.get(ck["calculation"])
            if calc is None:
                raise ProgramError(f"checksum '{ck['name']}' uses unknown calculation '{ck['calculation']}'")
            slot, info, hdr = self.layout.field_ref(ck["target"])
            cond = self.ec.boolean(ck["if_cond"]) if ck.get("if_cond") else "True"
            entry = (self.calculation_output(ck["calculation"]), slot, info.width, hdr.base, cond)
            if ck.get("verify", True):
                verify.append(entry)
            if ck.get("update", True):
                update.append(entry)
        o("def verify_checksums(F):")
        o.indent()
        o('"""True when every checksum to verify is correct."""')
        o("ok = True")
        for calc, slot, _w, base, cond in verify:
            o(f"if F[{base}] and {cond} and {calc} != F[{slot}]: ok = False")
        o("return ok")
        o.dedent()
        o()
        o("def update_checksums(F):")
        o.indent()
        o("pass")
        for calc, slot, w, _b, cond in update:
            o(f"if {cond}: F[{slot}] = {calc} & {_mask(w)}")
        o.dedent()
        o()

    # -- deparser ------------------------------------------------------------------------
    def _deparser(self) -> None:
        deparsers = self.js.get("deparsers", [])
        if not deparsers:
            raise ProgramError("the program has no deparser")
        dep = next((d for d in deparsers if d["name"] == "deparser"), deparsers[0])
        o = self.out
        o("def deparse(F):")
        o.indent()
        o('"""Bytes of the valid headers, in deparser order (checksums already updated)."""')
        for prim in dep.get("primitives", []):
            o.block(self.pc.compile(prim))
        o("out = []")
        for name in dep.get("order", []):
            self._emit_header(self.layout.header(name))
        o("return b''.join(out)")
        o.dedent()
        o()

    def _emit_header(self, hdr: HeaderInstance) -> None:
        o = self.out
        t = hdr.type
        if t.varbit is not None:
            o(f"if F[{hdr.base}]: out.append(_pack_header(F, {hdr.base}, {self.bind(t)}))")
            self.ns["_pack_header"] = pack_header
            return
        first, packed = header_codec.pack_source(t, lambda i: hdr.base + 1 + i, self._struct(t),
                                                 fits=hdr.name not in TARGET_WRITTEN_HEADERS)
        if not first:
            o(f"if F[{hdr.base}]: out.append({packed})")
            return
        o(f"if F[{hdr.base}]:")
        o.indent()
        o.block(first)
        o(f"out.append({packed})")
        o.dedent()

    # -- control flow --------------------------------------------------------------------
    def _pipeline(self, pipe: dict) -> None:
        """Each node becomes a function (the node loop, the reference path); the pipeline
        itself runs the nodes as one structured function where the graph allows it."""
        names: dict[str, str] = {}      # node name -> its function
        for t in pipe.get("tables", []):
            names[t["name"]] = self._ident("_t")
        for c in pipe.get("conditionals", []):
            names[c["name"]] = self._ident("_c")
        for a in pipe.get("action_calls", []):
            names[a["name"]] = self._ident("_ac")

        def node(n: str | None) -> str:
            if n is None:
                return "None"
            if n not in names:
                raise ProgramError(f"pipeline '{pipe['name']}' refers to unknown node '{n}'")
            return names[n]

        blocks: dict[str, Block] = {}
        comments: dict[str, str] = {}
        for t in pipe.get("tables", []):
            blocks[t["name"]] = self._table_block(t)
            comments[t["name"]] = f"table {comment(t['name'])}"
        for c in pipe.get("conditionals", []):
            blocks[c["name"]] = Block([], [c.get("true_next"), c.get("false_next")],
                                      cond=self.ec.boolean(c["expression"]))
            comments[c["name"]] = comment(c["name"])
        for a in pipe.get("action_calls", []):
            blocks[a["name"]] = Block(self._action_lines(a["action_id"], ()), [a.get("next_node")])
            comments[a["name"]] = comment(a["name"])
        for name, b in blocks.items():
            for s in b.succs:
                node(s)              # every successor must exist
            self._node_function(names[name], comments[name], b, node)

        o = self.out
        init = pipe.get("init_table")
        node(init)
        fn = self.pipeline_fns[pipe["name"]] = self._ident("_pipe")
        body = None
        if self.fuse:
            ipdom = post_dominators(init, blocks)
            if ipdom is not None:
                body = Structurer(blocks, ipdom, lambda n: f"_run_nodes(F, {node(n)})",
                                  budget=4 * len(blocks) + 64).emit(init)
        o(f"def {fn}(F):  # pipeline {comment(pipe['name'])}")
        o.indent()
        o("try:")
        if body is not None:
            o.indent()
            o.block(body)
            o.dedent()
        else:
            o(f"    _run_nodes(F, {node(init)})")
        o("except _Exit:")
        o("    pass")
        o.dedent()
        o()

    def _node_function(self, fn: str, what: str, b: Block, node) -> None:
        """The node as a function of the node loop: its lines, then its successor's function."""
        o = self.out
        if b.selector is not None:
            nx = self._ident("_nx")
            o(f"{nx} = {{}}  # filled below, once every node exists")
            self._deferred_next.append((nx, {v: node(s) for vs, s in zip(b.cases, b.succs) for v in vs}))
        o(f"def {fn}(F):  # {what}")
        o.indent()
        o.block(b.lines)
        if b.cond is not None:
            o(f"return {node(b.succs[0])} if {b.cond} else {node(b.succs[1])}")
        elif b.selector is not None:
            o(f"return {nx}.get({b.selector}, {node(b.succs[-1])})")
        else:
            o(f"return {node(b.succs[0])}")
        o.dedent()
        o()

    def _action_lines(self, action_id: int, data: tuple) -> list[str]:
        """An action run with constant data: its body inline, or (with jumps, or long) a call."""
        body = self._action_bodies.get(action_id)
        if body is None or len(body) > MAX_INLINE_LINES:
            return [f"{self.action_name(action_id)}(F, {tuple(data)!r})"]
        return ([f"D = {tuple(data)!r}"] if data else []) + body

    def _table_block(self, t: dict) -> Block:
        """A table apply: lookup, counters and meter, the action; then its successor, by hit
        or miss, or by the action that ran (``_i``: its id, -1 when none ran)."""
        table = self.obj.tables[t["name"]]
        tb = self.bind(table)
        next_tables = t.get("next_tables", {})
        hit_miss = "__HIT__" in next_tables or "__MISS__" in next_tables
        default_next = t.get("base_default_next")
        action_next: dict[int, str | None] = {}
        for aid, aname in zip(t.get("action_ids", []), t.get("actions", [])):
            aid = json_int(aid, f"table '{t['name']}': action id")
            action_next[aid] = next_tables.get(aname, default_next)
        key_parts = [self._key_source(k) for k in t.get("key", [])]
        if not key_parts:        # p4c wraps every action called in a control in such a table
            a = table.default_action
            if table.default_const and a is not None:    # always the same action: inline
                nxt = next_tables.get("__MISS__") if hit_miss else action_next.get(a.id, default_next)
                return Block(self._action_lines(a.id, tuple(table.default_data)), [nxt])
            lines = [f"a = {tb}.default_action",
                     "if a is not None:",
                     *_indented(_run_action(f"{tb}.default_data"))]
            if hit_miss:
                return Block(lines, [next_tables.get("__MISS__")])
            return by_action(lines, action_next, default_next)
        key = "(" + "".join(p + ", " for p in key_parts) + ")"
        il = self.layout.hidden["ingress_length"]
        if table.kind == EXACT:       # the entry dict itself, keyed by (values,)
            lines = [f"e = {self.bind(table.exact_get())}(({key},))"]
        else:                         # the recent lookups first: a call less for a key seen before
            lines = [f"k = {key}",
                     f"e = {self.bind(table.cached_get())}(k, {self.bind(NOT_CACHED)})",
                     f"if e is {self.bind(NOT_CACHED)}:",
                     f"    e = {self.bind(table.lookup)}(k)"]
        lines += ["if e is None:",
                 f"    a = {tb}.default_action",
                 "    if a is not None:",
                  *_indented(_indented(_run_action(f"{tb}.default_data"))),
                 "else:"]
        hit = []
        if t.get("with_counters"):
            hit += ["e.packets += 1", f"e.bytes += F[{il}]"]
        if t.get("direct_meters"):
            meter = self.obj.meters[t["direct_meters"]]
            target = self.pc.lvalue({"type": "field", "value": meter.result_target})
            hit.append(target.store(f"e.meter.execute(F[{il}])"))
        if t.get("type", "simple") == "simple":
            hit += ["a = e.action", *_run_action("e.data")]
        else:                    # a selector may find no member: the entry hit, no action ran
            hit += self._profile_action(table.profile)
        lines += ["    " + ln for ln in hit]
        if hit_miss:
            return Block(lines, [next_tables.get("__HIT__"), next_tables.get("__MISS__")], cond="e is not None")
        return by_action(lines, action_next, default_next)

    def _profile_action(self, profile: ActionProfile) -> list[str]:
        """Run the action of the member an indirect table's entry ``e`` leads to: its member,
        or the member its group picks as BMv2 does, ``handles[hash % len(handles)]`` with the
        selector's hash truncated to 32 bits (action_profiles.py). No member (a group gone or
        empty, a member gone): no action runs."""
        if profile.selector is None:
            pick = "0"
        else:
            pick = f"(({self.calculation_output(profile.selector.name)}) & 0xFFFFFFFF)"
        return [f"g = {self.bind(profile.groups)}.get(e.group)",
                "if g is not None and g.handles:",
                f"    m = {self.bind(profile.by_handle)}[g.handles[{pick} % len(g.handles)]]",
                "else:",
                f"    m = {self.bind(profile.members)}.get(e.member)",
                "if m is None:",
                "    a = None",
                "else:",
                "    a = m.action",
                *_indented(_run_action("m.data"))]

    def _key_source(self, k: dict) -> str:
        mt, target = k.get("match_type"), k.get("target")
        if mt == "valid":
            return f"F[{self.layout.header(target).base}]"
        slot, info, _ = self.layout.field_ref(target)
        width = 1 if info is None else info.width
        src = f"F[{slot}]"
        if info is not None and info.signed:
            src = f"({src} & {_mask(width)})"
        if k.get("mask"):
            src = f"({src} & {parse_hexstr(k['mask']):#x})"
        return src

    def _finish_next_maps(self) -> None:
        o = self.out
        for nx, mapping in self._deferred_next:
            items = ", ".join(f"{aid}: {fn}" for aid, fn in mapping.items())
            o(f"{nx}.update({{{items}}})")


def error_codes(js: dict) -> dict[str, int]:
    """The program's parser errors by name, with the core errors BMv2 adds where the JSON lacks them."""
    codes = {name: json_int(value, f"value of error '{name}'", 0) for name, value in js.get("errors", [])}
    nxt = max(codes.values(), default=-1) + 1
    for name in CORE_ERRORS:
        if name not in codes:
            codes[name] = nxt
            nxt += 1
    return codes


def _run_action(data: str) -> list[str]:
    """Run the action ``a`` with ``data``: an action with nothing to do has no function (None)."""
    return ["af = a.fn", "if af is not None:", f"    af(F, {data})"]


def _indented(lines: list[str]) -> list[str]:
    return ["    " + ln for ln in lines]


def by_action(lines: list[str], action_next: dict[int, str | None], default_next: str | None,
              selector: str = "-1 if a is None else a.id") -> Block:
    """A block that goes on by the action that ran (``selector``: its id, -1 when none ran);
    actions going to the same node share an arm."""
    arms: dict[str | None, list[int]] = {}
    for aid, nxt in action_next.items():
        if nxt != default_next:
            arms.setdefault(nxt, []).append(aid)
    if not arms:
        return Block(lines, [default_next])
    return Block(lines, [*arms, default_next], selector=selector, cases=[tuple(ids) for ids in arms.values()])


def lookahead_args(v: list) -> tuple[int, int]:
    """(bit offset, width) of a lookahead operand."""
    return json_width(v[0], "lookahead offset", 0), json_width(v[1], "lookahead width")


# Runs of a calculation's input that are not a group of fixed-width fields (guard slots are >= 0)
_HEADER_RUN = -1         # a whole header
_VARBIT_RUN = -2         # a header's varbit field


def _concat(parts: list[tuple[str, int]]) -> str:
    """Bit-concatenation of (source, width) parts, first part most significant."""
    expr = parts[0][0]
    for src, width in parts[1:]:
        expr = f"(({expr}) << {width}) | {src}"
    return f"({expr})"        # whole: callers shift it (padding) or OR it into more


def _modular_sum(parts: list[tuple[str, int]]) -> str:
    """The bit-concatenation of (source, width) parts, first part most significant, modulo
    0xFFFF up to a multiple of it: each part shifted by its bit position modulo 16, summed."""
    terms, position = [], 0
    for src, width in reversed(parts):
        shift = position % 16
        terms.append(f"({src} << {shift})" if shift else src)
        position += width
    return f"({' + '.join(reversed(terms))})"


def _slot(base: str, offset: int) -> str:
    return str(int(base) + offset) if base.isdigit() else f"{base} + {offset}"


def _set_valid_union(F: list, base: int, siblings: dict) -> None:
    F[base] = 1
    for s in siblings.get(base, ()):
        F[s] = 0


def pack_header(F: list, base: int, htype: HeaderType) -> bytes:
    """Serialize one valid header (varbit fields at their current width)."""
    x, n = 0, 0
    for f in htype.fields:
        width = F[base + 1 + len(htype.fields)] if f.width is None else f.width
        x = (x << width) | (F[base + 1 + f.index] & ((1 << width) - 1))
        n += width
    return x.to_bytes(n // 8, "big")


def extract_varbit(F: list, base: int, htype: HeaderType, pkt: bytes, o: int, nbits: int,
                   max_bytes: int, errors: dict) -> int:
    """extract_VL: a header whose varbit field is ``nbits`` long; returns the new offset."""
    from .helpers import ParserFault
    if nbits % 8:
        raise ParserFault(errors["ParserInvalidArgument"])
    nbytes = htype.fixed_bits // 8 + nbits // 8
    if len(pkt) - o < nbytes:
        raise ParserFault(errors["PacketTooShort"])
    if max_bytes and max_bytes < nbytes:
        raise ParserFault(errors["HeaderTooShort"])
    v = int.from_bytes(pkt[o:o + nbytes], "big")
    shift = nbytes * 8
    for f in htype.fields:
        width = nbits if f.width is None else f.width
        shift -= width
        F[base + 1 + f.index] = (v >> shift) & ((1 << width) - 1)
    F[base + 1 + len(htype.fields)] = nbits
    return o + nbytes
