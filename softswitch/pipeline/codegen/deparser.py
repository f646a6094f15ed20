"""The deparser: ``deparse(F)``, the bytes of the valid headers in the deparser's order."""
from __future__ import annotations

from .. import header_codec
from ..errors import ProgramError
from ..expressions import TARGET_WRITTEN_HEADERS
from ..layout import HeaderInstance
from ..primitives import PrimitiveCompiler
from .context import Context
from .support import pack_header


class Deparser:
    def __init__(self, ctx: Context, pc: PrimitiveCompiler):
        self.ctx = ctx
        self.pc = pc

    def define(self) -> None:
        deparsers = self.ctx.js.get("deparsers", [])
        if not deparsers:
            raise ProgramError("the program has no deparser")
        dep = next((d for d in deparsers if d["name"] == "deparser"), deparsers[0])
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
