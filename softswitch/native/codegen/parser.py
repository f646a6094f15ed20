"""The parser in C: ``ss_parse``, its states as labels and its transitions as gotos; a parser
error leaves by ``fail`` with the offset reached and the error in standard_metadata."""
from __future__ import annotations

from dataclasses import dataclass

from ...pipeline import header_codec
from ...pipeline.codegen import lookahead_args, one_of
from ...pipeline.errors import ProgramError
from ...pipeline.expressions import parse_hexstr
from ...pipeline.layout import FieldInfo, HeaderType
from .context import MAX_WIDTH, Context, Unsupported, const, mask, wide
from .expressions import Expressions
from .primitives import Primitives


@dataclass(eq=False)
class Parser:
    ctx: Context
    ex: Expressions
    primitives: Primitives

    def define(self) -> None:
        ctx = self.ctx
        parser = one_of(ctx.js, "parser")
        states = {s["name"]: s for s in parser.get("parse_states", [])}
        labels = {name: ctx.ident("PS") for name in states}

        def goto(name):
            if name is None:
                return "goto accept;"
            if name not in labels:
                raise ProgramError(f"parser refers to unknown state '{name}'")
            return f"goto {labels[name]};"

        perr = ctx.lay.intrinsic("standard_metadata.parser_error")
        lines = ["ss_st *S = (ss_st *)st;", "uint32_t off = 0; int err = 0; ss_u128 _k = 0, _v = 0; int32_t _b = 0;",
                 "(void)_k; (void)_v; (void)_b;", goto(parser.get("init_state"))]
        for name, s in states.items():
            lines.append(f"{labels[name]}:;")
            for op in s.get("parser_ops", []):
                lines += self._parser_op(op)
            lines += self._transition(s, goto)
        lines += ["accept:", "*consumed = off;", "return S->err;",
                  "fail:", f"S->s[{perr}] = (uint64_t)err;" if perr is not None else ";",
                  "*consumed = off;", "return S->err;"]
        ctx.out.append("int ss_parse(ss_objects *o, void *st, const uint8_t *pkt, uint32_t len, uint32_t *consumed) {")
        ctx.out += ["    " + ln for ln in lines] + ["}", ""]

    def _fail(self, code: str) -> str:
        return f"{{ err = {code}; goto fail; }}"

    def _error(self, name: str) -> str:
        return self._fail(str(self.ctx.errors[name]))

    def _too_short(self, n: str) -> str:
        return f"if (len - off < (uint32_t)({n})) {self._error('PacketTooShort')}"

    def _parser_op(self, op: dict) -> list[str]:
        ex = self.ex
        kind, params = op.get("op"), op.get("parameters", [])
        if kind == "extract":
            return self._extract(params[0])
        if kind == "extract_VL":
            return self._extract(params[0], ex.value(params[1]).src)
        if kind == "set":
            dst, src = ex.lvalue(params[0]), params[1]
            if src.get("type") == "lookahead":
                off, width = lookahead_args(src["value"])
                nbytes = (off + width + 7) // 8
                return [self._too_short(str(nbytes)),
                        f"_v = ss_peek(pkt, len, off, {off}, {width});", dst.store("_v")]
            return [dst.store(ex.value(src))]
        if kind == "verify":
            return [f"if (!{ex.boolean(params[0])}) {self._fail(f'(int){ex.value(params[1]).src}')}"]
        if kind in ("shift", "advance"):
            amount = ex.value(params[0]).src
            if kind == "shift":
                return [self._too_short(f"{amount}"), f"off += (uint32_t){amount};"]
            return [f"{{ ss_u128 _bits = {amount};",
                    f"  if (_bits % 8) {self._error('ParserInvalidArgument')}",
                    f"  if ((ss_u128)(len - off) < _bits / 8) {self._error('PacketTooShort')}",
                    "  off += (uint32_t)(_bits / 8); }"]
        if kind == "primitive":
            return self.primitives.primitive(params[0])
        raise ProgramError(f"unsupported parser operation '{kind}'")

    def _extract(self, target: dict, vl_bits: str | None = None) -> list[str]:
        ctx = self.ctx
        t, v = target.get("type"), target.get("value")
        if t == "regular":
            hdr = ctx.lay.header(v)
            return self._extract_into(str(hdr.base), hdr.type, vl_bits) + self.primitives.set_valid(str(hdr.base))
        if t == "stack":
            st = ctx.lay.stack(v)
            bases = ctx.static("int32_t", [str(h.base) for h in st.headers])
            return [f"if (S->s[{st.next_slot}] >= {len(st.headers)}) {self._error('StackOutOfBounds')}",
                    f"_b = {bases}[S->s[{st.next_slot}]];",
                    *self._extract_into("_b", st.headers[0].type, vl_bits),
                    "S->s[_b] = 1;", f"S->s[{st.next_slot}] += 1;"]
        raise Unsupported(f"extract into a '{t}'")

    def _extract_into(self, base: str, htype: HeaderType, vl_bits: str | None = None) -> list[str]:
        if htype.varbit is not None:
            if vl_bits is None:
                raise ProgramError(f"header type '{htype.name}' has a varbit field: extract_VL needed")
            return self._extract_varbit(base, htype, vl_bits)
        if htype.fixed_bits % 8:
            raise ProgramError(f"header type '{htype.name}' is not a whole number of bytes")
        nbytes = htype.fixed_bits // 8
        lines = [self._too_short(str(nbytes))]
        at = 0
        for c in header_codec.chunks(htype):
            n = c.bits // 8
            if n > 16:
                raise Unsupported(f"header type '{htype.name}': {n} bytes without a byte boundary between fields")
            narrow = n <= 8 and not any(wide(f) for f in c.fields)
            load = f"ss_load_be64(pkt + off + {at}, {n})" if narrow else f"ss_load_be(pkt + off + {at}, {n})"
            shift = c.bits
            for f in c.fields:
                shift -= f.width
                val = f"(_x >> {shift})" if shift else "_x"
                lines.append("{ " + ("uint64_t" if narrow else "ss_u128") + " _x = " + load + "; "
                             + self.ctx.dyn_slot(base, 1 + f.index, f).store(val) + " }")
            at += n
        lines.append(f"off += {nbytes};")
        return lines

    def _extract_varbit(self, base: str, htype: HeaderType, vl_bits: str) -> list[str]:
        """pipeline/codegen/support.py's extract_varbit: the varbit field ``vl_bits`` long,
        checked in its order."""
        dyn_slot = self.ctx.dyn_slot
        max_bytes = htype.max_length or 0
        lines = [f"{{ ss_u128 _nb = {vl_bits};",
                 f"  if (_nb % 8) {self._error('ParserInvalidArgument')}",
                 f"  ss_u128 _nbytes = {htype.fixed_bits // 8} + _nb / 8;",
                 f"  if ((ss_u128)(len - off) < _nbytes) {self._error('PacketTooShort')}",
                 f"  if ({max_bytes} < _nbytes) {self._error('HeaderTooShort')}",
                 "  uint32_t _pos = 0;"]
        for f in htype.fields:
            width = "(uint32_t)_nb" if f.width is None else str(f.width)
            lines.append("  " + dyn_slot(base, 1 + f.index, f).target
                         + f" = ({dyn_slot(base, 1 + f.index, f).cast})ss_get_bits(pkt + off, _pos, {width});"
                         + f" _pos += {width};")
        lines += [f"  {dyn_slot(base, len(htype.fields) + 1, FieldInfo('', 64, False, 0)).target} = (uint64_t)_nb;",
                  "  off += (uint32_t)_nbytes; }"]
        return lines

    def _transition(self, s: dict, goto) -> list[str]:
        transitions = s.get("transitions", [])
        default, cases = "goto accept;", []
        for t in transitions:
            if "type" not in t:
                t = dict(t, type="default" if t.get("value") == "default" else "hexstr")
            if t["type"] == "default":
                default = goto(t.get("next_state"))
            elif t["type"] == "hexstr":
                cases.append((t, goto(t.get("next_state"))))
            elif t["type"] == "parse_vset":
                if t["value"] not in self.ctx.value_sets:
                    raise ProgramError(f"unknown parse value set '{t['value']}'")
                cases.append((t, goto(t.get("next_state"))))
            else:
                raise ProgramError(f"unsupported transition type '{t['type']}'")
        if not cases:
            return [default]
        parts, total = [], 0
        for k in s.get("transition_key", []):
            src, width = self._key_part(k)
            parts.append((src, width))
            total += (width + 7) // 8 * 8
        if total > MAX_WIDTH:
            raise Unsupported(f"a transition key of {total} bits")
        key = parts[0][0]
        for src, width in parts[1:]:
            key = f"(ss_shl({key}, {(width + 7) // 8 * 8}) | {src})"
        lines = [f"_k = {key};"]
        for t, nxt in cases:
            if t["type"] == "parse_vset":
                vs = self.ctx.value_sets.index(t["value"])
                m = parse_hexstr(t["mask"]) if t.get("mask") else 0
                lines.append(f"if (ss_value_set_contains(&o->value_sets[{vs}], _k, {const(m).src}, "
                             f"{int(bool(t.get('mask')))})) {nxt}")
                continue
            value = parse_hexstr(t["value"])
            if t.get("mask"):
                m = parse_hexstr(t["mask"])
                lines.append(f"if ((_k & {const(m).src}) == {const(value & m).src}) {nxt}")
            else:
                lines.append(f"if (_k == {const(value).src}) {nxt}")
        return lines + [default]

    def _key_part(self, k: dict) -> tuple[str, int]:
        ctx = self.ctx
        t, v = k.get("type"), k.get("value")
        if t == "field":
            slot, info, _ = ctx.lay.field_ref(v)
            width = 1 if info is None else info.width
            src = f"((ss_u128)S->s[{slot}])" if info is None else ctx.slot(slot, info).read().src
            return f"((ss_u128){src} & {mask(width)})", width
        if t == "stack_field":
            st = ctx.lay.stack(v[0])
            info = st.headers[0].type.field(v[1])
            src = ctx.dyn_slot(self.ex.stack_last(st), 1 + info.index, info).read().src
            return f"((ss_u128){src} & {mask(info.width)})", info.width
        if t == "lookahead":
            off, width = lookahead_args(v)
            if width > MAX_WIDTH:
                raise Unsupported(f"a lookahead of {width} bits")
            return f"ss_peek(pkt, len, off, {off}, {width})", width
        if t == "expression":
            return f"((ss_u128){self.ex.value(v).src} & {mask(32)})", 32
        if t == "union_stack_field":
            raise Unsupported("union stacks")
        raise ProgramError(f"unsupported transition key type '{t}'")
