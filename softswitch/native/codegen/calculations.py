"""Calculations and checksums in C: a function per calculation that packs its input as BMv2
does (MSB first, the fields of invalid headers skipped, a varbit at its current width) and
hashes it with objects.c's algorithms; ``ss_verify_checksums`` and ``ss_update_checksums``."""
from __future__ import annotations

from ...pipeline.errors import ProgramError
from ...pipeline.expressions import parse_hexstr
from ...pipeline.untrusted import json_int
from .context import MAX_WIDTH, Context, Unsupported, const
from .expressions import Expressions

# hashes.py algorithm name -> objects.h enum ss_algo (crc16/32_custom: their default parameters,
# the only ones a program can have: no extern sets others)
ALGORITHM_IDS = {"crc16": 0, "crc16_custom": 0, "crc32": 1, "crc32_custom": 1, "crcCCITT": 2,
                 "csum16": 3, "cksum16": 3, "identity": 4, "xor16": 5, "xor32": 6,
                 "crc8_custom": 7, "crc64_custom": 8, "hash_ex": 9}


class Calculations:
    def __init__(self, ctx: Context, ex: Expressions):
        self.ctx = ctx
        self.ex = ex
        self.algos = {c["name"]: c["algo"] for c in ctx.js.get("calculations", [])}
        for pipe in ctx.js.get("pipelines", []):
            for ap in pipe.get("action_profiles", []):
                if ap.get("selector"):
                    self.algos[f"{ap['name']}$selector"] = ap["selector"]["algo"]
        self.calc_fn: dict[str, str] = {}

    def calculation(self, name: str) -> str:
        """The C function computing calculation ``name`` for the packet (made once)."""
        fn = self.calc_fn.get(name)
        if fn is not None:
            return fn
        ctx = self.ctx
        algo = self.algos.get(name)
        if algo not in ALGORITHM_IDS:
            raise Unsupported(f"hash algorithm '{algo}' (calculation '{name}')")
        spec = next(c for c in ctx.p.calculation_specs if c["name"] == name)
        fn = self.calc_fn[name] = ctx.ident("CALC")
        body = ["ss_bits b; b.nbits = 0; b.overflow = 0;"]
        for item in spec["input"]:
            t, v = item.get("type"), item.get("value")
            if t == "field":
                slot, info, hdr = ctx.lay.field_ref(v)
                if info is not None and info.width is None:        # at its current width, if valid
                    body.append(f"if (S->s[{hdr.base}]) ss_bits_put(&b, {ctx.slot(slot, info).target}, "
                                f"(uint32_t)S->s[{hdr.varbit_len_slot}]);")
                    continue
                width = 1 if info is None else info.width
                put = f"ss_bits_put(&b, (ss_u128){ctx.slot(slot, info).read().src if info else f'S->s[{slot}]'}, {width});"
                body.append(put if hdr.metadata else f"if (S->s[{hdr.base}]) {put}")
            elif t == "hexstr":
                width = json_int(item["bitwidth"], "bitwidth of a constant", 0, MAX_WIDTH)
                body.append(f"ss_bits_put(&b, {const(parse_hexstr(v) & ((1 << width) - 1)).src}, {width});")
            elif t == "header":
                hdr = ctx.lay.header(v)
                puts = [f"ss_bits_put(&b, (ss_u128){ctx.slot(hdr.base + 1 + f.index, f).read().src}, "
                        f"{f.width if f.width is not None else f'(uint32_t)S->s[{hdr.varbit_len_slot}]'});"
                        for f in hdr.type.fields]
                body.append(f"if (S->s[{hdr.base}]) {{ {' '.join(puts)} }}")
            elif t == "payload":
                raise Unsupported(f"calculation '{name}' over the payload")
            else:
                raise ProgramError(f"calculation '{name}': unsupported input type '{t}'")
        body.append("if (b.nbits % 8) ss_bits_put(&b, 0, 8 - b.nbits % 8);")
        body.append("if (b.overflow) S->err = SS_ERR_TOO_LONG;      /* an input over 2 KiB: the packet fails */")
        body.append(f"return ss_hash({ALGORITHM_IDS[algo]}, b.buf, b.nbits / 8);")
        ctx.out.append(f"static uint64_t {fn}(ss_objects *o, ss_st *S) {{  /* calculation */")
        ctx.out += ["    " + ln for ln in body] + ["}", ""]
        return fn

    def checksums(self) -> None:
        """``ss_verify_checksums`` and ``ss_update_checksums``."""
        ctx = self.ctx
        verify, update = [], []
        for ck in ctx.js.get("checksums", []):
            if ck.get("type", "generic") != "generic":
                raise Unsupported(f"checksum type '{ck.get('type')}'")
            slot, info, hdr = ctx.lay.field_ref(ck["target"])
            cond = self.ex.boolean(ck["if_cond"]) if ck.get("if_cond") else "1"
            calc = self.calculation(ck["calculation"])
            lv = ctx.slot(slot, info)
            if ck.get("verify", True):
                verify.append(f"if (S->s[{hdr.base}] && {cond} && (ss_u128){calc}(o, S) != {lv.read().src}) *ok = 0;")
            if ck.get("update", True):
                update.append(f"if ({cond}) {lv.store(f'{calc}(o, S)')}")
        ctx.out += ["int ss_verify_checksums(ss_objects *o, void *st, int *ok) {",
                    "    ss_st *S = (ss_st *)st;", "    *ok = 1;", *("    " + ln for ln in verify),
                    "    return S->err;", "}", "",
                    "int ss_update_checksums(ss_objects *o, void *st) {",
                    "    ss_st *S = (ss_st *)st;", *("    " + ln for ln in update), "    return S->err;", "}", ""]
