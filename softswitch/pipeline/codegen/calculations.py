"""Calculations and checksums: a function per calculation that builds its input bytes as BMv2
packs them (a csum16 one also straight from its fields), a calculation's value as source for
the actions and tables that use it, and ``verify_checksums``/``update_checksums``."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...hashes import csum16
from ..errors import ProgramError
from ..expressions import parse_hexstr
from ..layout import HeaderInstance
from ..untrusted import comment, json_width
from .context import Context, mask
from .support import pack_header

# Runs of a calculation's input that are not a group of fixed-width fields (guard slots are >= 0)
_HEADER_RUN = -1         # a whole header
_VARBIT_RUN = -2         # a header's varbit field


@dataclass(eq=False)
class Calculations:
    ctx: Context
    inputs: dict[str, str] = field(default_factory=dict)   # calculation name -> input function
    direct: dict[str, str] = field(default_factory=dict)   # calculation name -> value function (csum16)

    def define(self) -> None:
        """An input function for every calculation (and a direct one for each csum16)."""
        for calc in self.ctx.obj.calculation_specs:
            self.inputs[calc["name"]] = self._input(calc)

    def output(self, calc_name: str) -> str:
        """Source of a calculation's value for the packet in ``F``."""
        direct = self.direct.get(calc_name)
        if direct is not None:
            return f"{direct}(F)"
        calc = self.ctx.obj.calculations[calc_name]     # its algorithm is never replaced: bound
        return f"{self.ctx.bind(calc.algorithm)}({self.inputs[calc_name]}(F))"

    def _input(self, calc: dict) -> str:
        """Define a function building a calculation's input bytes; returns its name.

        BMv2 packs the inputs MSB first and skips the fields of invalid headers, so fields
        are grouped into runs that share one validity check; a run of metadata or constants
        needs none, and an input with no checks at all packs to a fixed size. A whole header
        or a varbit field (at its current width, as BMv2 packs it) is a run of its own."""
        ctx = self.ctx
        name = ctx.ident("_ci")
        runs: list[tuple[int | None, list[tuple[str, int]]]] = []   # (guard slot, [(src, width)])
        headers: list[tuple[int, HeaderInstance]] = []               # whole-header and varbit runs' headers
        payload = False
        for item in calc.get("input", []):
            t, v = item.get("type"), item.get("value")
            if t == "field":
                slot, info, hdr = ctx.layout.field_ref(v)
                if info is not None and info.width is None:
                    headers.append((len(runs), hdr))
                    runs.append((_VARBIT_RUN, []))
                    continue
                guard = None if hdr.metadata else hdr.base
                part = ctx.field_in_width(v)
            elif t == "hexstr":
                width = json_width(item["bitwidth"], f"calculation '{calc['name']}': bitwidth of a constant")
                guard, part = None, (f"{parse_hexstr(v) & ((1 << width) - 1):#x}", width)
            elif t == "header":
                headers.append((len(runs), ctx.layout.header(v)))
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
        tail = f" + F[{ctx.layout.hidden['payload']}]" if payload else ""
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
        o = ctx.out
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
        if not payload and ctx.obj.calculations[calc["name"]].algorithm is csum16:
            self.direct[calc["name"]] = self._csum16_direct(calc["name"], runs, run_headers)
        return name

    def _whole_header_input(self, hdr: HeaderInstance, append: str) -> list[str]:
        """Lines adding a whole header (if valid) to a calculation's input with ``append``,
        which reads its bytes from ``_h``."""
        self.ctx.ns["_pack_header"] = pack_header
        return [f"if F[{hdr.base}]:",
                f"    _h = _pack_header(F, {hdr.base}, {self.ctx.bind(hdr.type)})",
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
        name = self.ctx.ident("_ck")
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
        o = self.ctx.out
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

    def checksums(self) -> None:
        """``verify_checksums(F)`` and ``update_checksums(F)``."""
        ctx = self.ctx
        verify, update = [], []
        for ck in ctx.js.get("checksums", []):
            if ck.get("type", "generic") != "generic":
                raise ProgramError(f"checksum '{ck['name']}': type '{ck.get('type')}' is not supported")
            calc = ctx.obj.calculations.get(ck["calculation"])
            if calc is None:
                raise ProgramError(f"checksum '{ck['name']}' uses unknown calculation '{ck['calculation']}'")
            slot, info, hdr = ctx.layout.field_ref(ck["target"])
            cond = ctx.ec.boolean(ck["if_cond"]) if ck.get("if_cond") else "True"
            entry = (self.output(ck["calculation"]), slot, info.width, hdr.base, cond)
            if ck.get("verify", True):
                verify.append(entry)
            if ck.get("update", True):
                update.append(entry)
        o = ctx.out
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
            o(f"if {cond}: F[{slot}] = {calc} & {mask(w)}")
        o.dedent()
        o()


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
