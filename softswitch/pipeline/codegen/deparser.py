"""The deparser: ``deparse(F)``, the bytes of the valid headers in the deparser's order."""
from __future__ import annotations

from dataclasses import dataclass

from .. import header_codec
from ..expressions import TARGET_WRITTEN_HEADERS
from ..layout import HeaderInstance
from ..primitives import PrimitiveCompiler
from .context import Context, one_of
from .support import pack_header


@dataclass(eq=False)
class Deparser:
    ctx: Context
    pc: PrimitiveCompiler

    def define(self) -> None:
        dep = one_of(self.ctx.js, "deparser")
        o = self.ctx.out
        o("def deparse(F):")
        o.indent()
        o('"""Bytes of the valid headers, in deparser order (checksums already updated)."""')
        for prim in dep.get("primitives", []):
            o.block(self.pc.compile(prim))
        o("out = []")
        for name in dep.get("order", []):
            self._emit_header(self.ctx.layout.header(name))
        o("return b''.join(out)")
        o.dedent()
        o()

    def _emit_header(self, hdr: HeaderInstance) -> None:
        o = self.ctx.out
        t = hdr.type
        if t.varbit is not None:
            o(f"if F[{hdr.base}]: out.append(_pack_header(F, {hdr.base}, {self.ctx.bind(t)}))")
            self.ctx.ns["_pack_header"] = pack_header
            return
        first, packed = header_codec.pack_source(t, lambda i: hdr.base + 1 + i, self.ctx.struct(t),
                                                 fits=hdr.name not in TARGET_WRITTEN_HEADERS)
        if not first:
            o(f"if F[{hdr.base}]: out.append({packed})")
            return
        o(f"if F[{hdr.base}]:")
        o.indent()
        o.block(first)
        o(f"out.append({packed})")
        o.dedent()
