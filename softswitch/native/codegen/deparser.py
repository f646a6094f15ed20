"""The deparser in C: ``ss_deparse`` writes the valid headers in the deparser's order, a
byte-aligned chunk of fields at a time (header_codec.chunks), a varbit at its current width."""
from __future__ import annotations

from dataclasses import dataclass

from ...pipeline import header_codec
from ...pipeline.codegen import one_of
from ...pipeline.layout import HeaderInstance
from .context import Context, Unsupported, mask, wide


@dataclass(eq=False)
class Deparser:
    ctx: Context

    def define(self) -> None:
        ctx = self.ctx
        dep = one_of(ctx.js, "deparser")
        lines = ["const ss_st *S = (const ss_st *)st;", "uint32_t at = 0;"]
        for name in dep.get("order", []):
            hdr = ctx.lay.header(name)
            lines += self._emit_header(hdr)
        lines += ["*written = at;", "return SS_OK;"]
        ctx.out.append("int ss_deparse(ss_objects *o, const void *st, uint8_t *out, uint32_t cap, uint32_t *written) {")
        ctx.out += ["    " + ln for ln in lines] + ["}", ""]

    def _emit_header(self, hdr: HeaderInstance) -> list[str]:
        slot = self.ctx.slot
        t = hdr.type
        if t.varbit is not None:              # support.pack_header: the varbit at its current width
            body = [f"uint32_t _vw = (uint32_t)S->s[{hdr.varbit_len_slot}], _n = ({t.fixed_bits} + _vw) / 8, _pos = 0;",
                    "if (cap - at < _n) return SS_ERR_TOO_LONG;", "memset(out + at, 0, _n);"]
            for f in t.fields:
                width = "_vw" if f.width is None else str(f.width)
                body.append(f"ss_put_bits(out + at, _pos, (ss_u128){slot(hdr.base + 1 + f.index, f).target}, "
                            f"{width}); _pos += {width};")
            body.append("at += _n;")
            return [f"if (S->s[{hdr.base}]) {{"] + ["    " + b for b in body] + ["}"]
        n = t.fixed_bits // 8
        body = [f"if (cap - at < {n}) return SS_ERR_TOO_LONG;"]
        at = 0
        for c in header_codec.chunks(t):
            size = c.bits // 8
            if size > 16:
                raise Unsupported(f"header type '{t.name}': {size} bytes without a byte boundary between fields")
            terms, shift = [], c.bits
            narrow = size <= 8 and not any(wide(f) for f in c.fields)    # 64-bit arithmetic will do
            for f in c.fields:
                shift -= f.width
                src = slot(hdr.base + 1 + f.index, f).target
                if narrow:
                    terms.append(f"(({src} & {(1 << f.width) - 1:#x}ull) << {shift})")
                else:
                    terms.append(f"(((ss_u128){src} & {mask(f.width)}) << {shift})")
            body.append(f"ss_store_be(out + at + {at}, {size}, {' | '.join(terms)});")
            at += size
        body.append(f"at += {n};")
        return [f"if (S->s[{hdr.base}]) {{"] + ["    " + b for b in body] + ["}"]
