"""What the generator's parts share while they write one program's module: its lines
(``Source``), the namespace it will run in and the names made for it.

Every identifier in the source is made here (a prefix and a counter, or ``_o<n>`` for an object
bound into the namespace), never taken from the JSON (untrusted.py).
"""
from __future__ import annotations

from typing import Any

from .. import header_codec
from ..errors import ProgramError
from ..expressions import RUNTIME_HELPERS, ExpressionCompiler
from ..helpers import BASE_NAMESPACE
from ..layout import HeaderType, Layout
from ..untrusted import json_int

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


class Context:
    """One program being generated: its JSON, layout and run-time objects (``obj``: the
    Program), the module's lines (``out``), its namespace (``ns``), the expression compiler
    all parts use (``ec``) and the program's parser error codes (``errors``)."""

    def __init__(self, js: dict, layout: Layout, objects: Any):
        self.js = js
        self.layout = layout
        self.obj = objects
        self.ns: dict[str, Any] = dict(BASE_NAMESPACE)
        self.ns.update(RUNTIME_HELPERS)
        self._bound: dict[int, str] = {}
        self.out = Source()
        self.ec = ExpressionCompiler(layout, self.bind, objects.registers)
        self.errors = error_codes(js)
        self._serial: dict[str, int] = {}
        self._structs: dict[str, str] = {}             # header type name -> its bound struct.Struct

    def ident(self, prefix: str) -> str:
        """A fresh identifier for generated source (never derived from the JSON)."""
        n = self._serial.get(prefix, 0)
        self._serial[prefix] = n + 1
        return f"{prefix}{n}"

    def bind(self, obj: Any) -> str:
        """The name ``obj`` has in the module's namespace (bound on first use)."""
        key = id(obj)
        name = self._bound.get(key)
        if name is None:
            name = f"_o{len(self._bound)}"
            self._bound[key] = name
            self.ns[name] = obj
        return name

    def struct(self, htype: HeaderType) -> str:
        """The name of the header type's struct.Struct (header_codec.py), bound once."""
        if htype.name not in self._structs:
            self._structs[htype.name] = self.bind(header_codec.header_struct(htype))
        return self._structs[htype.name]

    def field_in_width(self, ref: list) -> tuple[str, int]:
        """(source, width) of a field's value, masked to its width unless its slot only ever
        holds values that fit (expressions.Compiled.bits)."""
        _, info, _ = self.layout.field_ref(ref)
        width = 1 if info is None else info.width
        value = self.ec.value({"type": "field", "value": ref})
        if value.bits is not None and value.bits <= width:
            return value.src, width
        return f"({value.src} & {mask(width)})", width


def error_codes(js: dict) -> dict[str, int]:
    """The program's parser errors by name, with the core errors BMv2 adds where the JSON lacks them."""
    codes = {name: json_int(value, f"value of error '{name}'", 0) for name, value in js.get("errors", [])}
    nxt = max(codes.values(), default=-1) + 1
    for name in CORE_ERRORS:
        if name not in codes:
            codes[name] = nxt
            nxt += 1
    return codes


def one_of(js: dict, kind: str) -> dict:
    """The program's parser or deparser (``kind``): the one so named, else the first."""
    found = js.get(kind + "s", [])
    if not found:
        raise ProgramError(f"the program has no {kind}")
    return next((p for p in found if p["name"] == kind), found[0])


def mask(width: int) -> str:
    return f"{(1 << width) - 1:#x}"


def indented(lines: list[str]) -> list[str]:
    return ["    " + ln for ln in lines]
