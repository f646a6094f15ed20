"""The parser: a function per parse state ``(F, pkt, o) -> (next state, o)`` and ``parse``,
which runs them from the start state and keeps a parser error in standard_metadata."""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import header_codec
from ..errors import ProgramError
from ..expressions import parse_hexstr
from ..layout import HeaderType
from ..primitives import PrimitiveCompiler
from ..untrusted import comment, json_width
from .context import Context, mask, one_of
from .support import extract_varbit


@dataclass(eq=False)
class Parser:
    ctx: Context
    pc: PrimitiveCompiler
    _state_fns: dict[str, str] = field(default_factory=dict)   # parser state name -> function

    def define(self) -> None:
        """The state functions, then ``parse``."""
        parser = one_of(self.ctx.js, "parser")
        states = {s["name"]: s for s in parser.get("parse_states", [])}
        self._state_fns = {name: self.ctx.ident("_ps") for name in states}
        for s in states.values():
            self._parse_state(s)
        o = self.ctx.out
        err_slot = self.ctx.layout.intrinsic("standard_metadata.parser_error")
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
        o = self.ctx.out
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
        return f"if len(pkt) - o < {nbytes_src}: raise _PErr({self.ctx.errors['PacketTooShort']})"

    def _parser_op(self, op: dict) -> None:
        o, ec = self.ctx.out, self.ctx.ec
        kind, params = op.get("op"), op.get("parameters", [])
        if kind == "extract":
            self._extract(params[0], None)
        elif kind == "extract_VL":
            self._extract(params[0], ec.data(params[1]))
        elif kind == "set":
            dst = self.pc.lvalue(params[0])
            src = params[1]
            if src.get("type") == "lookahead":
                o.block(self._lookahead_lines(*lookahead_args(src["value"]), "_v"))
                o(dst.store("_v"))
            else:
                o(dst.assign(ec.value(src)))
        elif kind == "verify":
            o(f"if not {ec.boolean(params[0])}: raise _PErr({ec.data(params[1])})")
        elif kind in ("shift", "advance"):
            amount = ec.data(params[0])
            nbytes = amount if kind == "shift" else "_n"
            if kind == "advance":
                o(f"_bits = {amount}")
                o(f"if _bits % 8: raise _PErr({self.ctx.errors['ParserInvalidArgument']})")
                o("_n = _bits // 8")
            o(self._too_short(nbytes))
            o(f"o += {nbytes}")
        elif kind == "primitive":
            o.block(self.pc.compile(params[0]))
        else:
            raise ProgramError(f"unsupported parser operation '{kind}'")

    def _extract(self, target: dict, vl_bits_src: str | None) -> None:
        o, layout = self.ctx.out, self.ctx.layout
        t, v = target.get("type"), target.get("value")
        if t == "regular":
            hdr = layout.header(v)
            self._extract_into(str(hdr.base), hdr.type, vl_bits_src)
            o.block(self.pc._set_valid(str(hdr.base)))
            return
        if t == "stack":
            st = layout.stack(v)
            bases = self.ctx.bind(tuple(h.base for h in st.headers))
            htype = st.headers[0].type
        elif t == "union_stack":
            st = layout.union_stack(v[0])
            # union members are named in the union type; their position picks the header
            idx = self._union_member_index(st, v[1])
            bases = self.ctx.bind(tuple(u.headers[idx].base for u in st.unions))
            htype = st.unions[0].headers[idx].type
        else:
            raise ProgramError(f"unsupported extract target type '{t}'")
        o(f"if F[{st.next_slot}] >= {len(self.ctx.ns[bases])}: "
          f"raise _PErr({self.ctx.errors['StackOutOfBounds']})")
        o(f"_b = {bases}[F[{st.next_slot}]]")
        self._extract_into("_b", htype, vl_bits_src)
        o.block(self.pc._set_valid("_b"))
        o(f"F[{st.next_slot}] += 1")

    def _union_member_index(self, ust, member_name: str) -> int:
        js = self.ctx.js
        utype_name = next((u["union_type"] for u in js.get("header_unions", [])
                           if u["name"] == ust.unions[0].name), None)
        utype = next((t for t in js.get("header_union_types", []) if t["name"] == utype_name), None)
        if utype is None:
            raise ProgramError(f"header union '{ust.unions[0].name}' has no known union type")
        names = [m[0] for m in utype["headers"]]
        if member_name not in names:
            raise ProgramError(f"union stack '{ust.name}' has no member '{member_name}'")
        return names.index(member_name)

    def _extract_into(self, base: str, htype: HeaderType, vl_bits_src: str | None) -> None:
        """Lines that read a header of ``htype`` at ``o`` into slots starting at ``base``."""
        o = self.ctx.out
        if htype.varbit is not None:
            if vl_bits_src is None:
                raise ProgramError(f"header type '{htype.name}' has a varbit field: extract_VL needed")
            max_bytes = htype.max_length or 0       # checked by the layout
            o(f"o = _extract_vl(F, {base}, {self.ctx.bind(htype)}, pkt, o, {vl_bits_src}, "
              f"{max_bytes}, {self.ctx.bind(self.ctx.errors)})")
            self.ctx.ns["_extract_vl"] = extract_varbit
            return
        nbytes = htype.fixed_bits // 8
        if htype.fixed_bits % 8:
            raise ProgramError(f"header type '{htype.name}' is not a whole number of bytes")
        o(self._too_short(str(nbytes)))
        o.block(header_codec.extract_lines(htype, lambda i: _slot(base, 1 + i), self.ctx.struct(htype)))
        o(f"o += {nbytes}")

    def _lookahead_lines(self, bit_offset: int, width: int, var: str) -> list[str]:
        nbytes = (bit_offset + width + 7) // 8
        tail = nbytes * 8 - bit_offset - width
        return [self._too_short(str(nbytes)),
                f"{var} = (int.from_bytes(pkt[o:o + {nbytes}], 'big') >> {tail}) & {mask(width)}"]

    def _transition(self, s: dict) -> None:
        o = self.ctx.out
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
                vs = self.ctx.obj.value_sets.get(t["value"])
                if vs is None:
                    raise ProgramError(f"unknown parse value set '{t['value']}'")
                vs.set_key_widths(widths)
                m = parse_hexstr(t["mask"]) if t.get("mask") else None
                o(f"if {self.ctx.bind(vs)}.contains(_k, {m}): return {nxt}, o")
            else:
                raise ProgramError(f"unsupported transition type '{t['type']}'")
        o(f"return {default}, o")

    def _transition_key_part(self, k: dict) -> tuple[str, int]:
        layout = self.ctx.layout
        t, v = k.get("type"), k.get("value")
        if t == "field":
            return self.ctx.field_in_width(v)
        if t == "stack_field":
            st = layout.stack(v[0])
            info = st.headers[0].type.field(v[1])
            return f"({self.ctx.ec._stack_last_field(v[0], v[1])} & {mask(info.width)})", info.width
        if t == "union_stack_field":
            ust = layout.union_stack(v[0])
            idx = self._union_member_index(ust, v[1])
            info = ust.unions[0].headers[idx].type.field(v[2])
            bases = self.ctx.bind(tuple(u.headers[idx].base for u in ust.unions))
            return f"(F[{bases}[F[{ust.next_slot}] - 1] + {1 + info.index}] & {mask(info.width)})", info.width
        if t == "lookahead":
            off, width = lookahead_args(v)
            nbytes = (off + width + 7) // 8
            tail = nbytes * 8 - off - width
            # BMv2 reads past the end of a short packet here; missing bytes read as zero
            return (f"((int.from_bytes(pkt[o:o + {nbytes}].ljust({nbytes}, b'\\0'), 'big') >> {tail})"
                    f" & {mask(width)})"), width
        if t == "expression":
            return self.ctx.ec.data(v), 32
        raise ProgramError(f"unsupported transition key type '{t}'")


def lookahead_args(v: list) -> tuple[int, int]:
    """(bit offset, width) of a lookahead operand."""
    return json_width(v[0], "lookahead offset", 0), json_width(v[1], "lookahead width")


def _slot(base: str, offset: int) -> str:
    return str(int(base) + offset) if base.isdigit() else f"{base} + {offset}"
