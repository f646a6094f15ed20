"""A loaded Program as one C file: every per-program function of native/abi.h.

The C is made from the same Program the Python path runs (its layout, action locals,
calculations, tables...), so the semantics checked against BMv2 are kept; the control flow
is the Python generator's (controlflow.Block, post_dominators and Structurer, written in C
through CSyntax), the header byte layout is header_codec.chunks.

Packet state (``ss_st``): ``s[slot]``, one uint64_t per slot of the Python path's layout (the
same slot numbers), holds every field of up to 64 bits, valid bits, stack indexes and hidden
registers; fields of 65..128 bits live in ``w[]`` (ss_u128), at the index ``WIDE_OF[slot]``
gives (``s[slot]`` unused). Signed fields are held as their value sign-extended (the Python
path holds the negative int): ``(int64_t)s[slot]``, ``(ss_i128)w[i]``. Temporaries that are
action locals in the Python path (action_locals.py) are C locals here too.

Expressions are computed in 128 bits: unsigned (ss_u128) unless an operand is signed
(ss_i128), which is the Python path's infinite precision wherever p4c masks a result to its
width (it masks every arithmetic result and cast: the JSON carries the masks); stores mask to
the field's width, or take the two's complement value of a signed field (two_comp_mod).

Variable-length fields of up to 128 bits are kept in w[] too, their current width in the
slot after the header's fields (the Python path's layout).

Refused (Unsupported, naming what), the switch then runs the Python path: fields or
constants wider than 128 bits, variable-length fields that may be; header union stacks (and
comparing or choosing whole unions); calculations over the payload; the hash algorithms xxh64,
toeplitz, round_robin(_consistent) and custom CRCs other than the four defaults; registers
wider than 64 bits; register reads inside expressions; deparser primitives; union-stack
assignment (assign_union_stack). Anything else the
generator trips on is Unsupported too, with its cause. ``log_msg`` does nothing on the
native path (the Python path logs).

The generator is a part per concern sharing one Context (context.py): expressions, primitives,
calculations and checksums, actions, the parser, the deparser, tables and controls; this module
checks the program, puts the parts' functions together in the file's order and adds the
program's own functions of abi.h (state, metadata, field lists, objects).
"""
from __future__ import annotations

from ...pipeline.errors import ProgramError
from ...pipeline.program import INTRINSICS, Program
from ...pipeline.untrusted import json_int
from .actions import Actions
from .calculations import Calculations
from .context import MAX_WIDTH, Context, Native, Unsupported
from .controls import Controls
from .deparser import Deparser
from .expressions import Expressions
from .parser import Parser
from .primitives import Primitives
from .tables import Tables

# abi.h enum ss_meta, in its order: intrinsic name (program.INTRINSICS) or hidden register
META = ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length", "parser_error",
        "checksum_error", "mcast_grp", "egress_rid", "priority", "ingress_global_timestamp",
        "egress_global_timestamp", "enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth", "qid",
        "@clone_session", "@clone_field_list", "@resubmit_field_list", "@recirculate_field_list",
        "@packet_length", "@truncate_length", "@learn_id", "@ingress_length")

_KIND = {"exact": 0, "lpm": 1, "ternary": 2, "range": 3, "optional": 4, "valid": 5}


def generate(program: Program) -> Native:
    """The program's C (Unsupported names what the native path cannot do yet)."""
    if not program.fuse:
        raise Unsupported("a program loaded unfused (the reference node loop)")
    try:
        return CGenerator(program).generate()
    except Unsupported:
        raise
    except (ProgramError, KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        # the Program loaded, so the Python path runs it: say what the generator tripped on
        raise Unsupported(f"the native generator failed on it ({type(e).__name__}: {e})") from e


def check_program(program: Program) -> None:
    """Refuse (Unsupported) what the native path cannot hold, before writing anything."""
    lay = program.layout
    for t in lay.header_types.values():
        if t.varbit is not None and any(h.type is t for h in lay.headers.values()):
            most = (t.max_length or 0) * 8 - t.fixed_bits
            if not t.max_length or most > MAX_WIDTH:
                raise Unsupported(f"variable-length field in header type '{t.name}' of up to "
                                  f"{most if t.max_length else 'unbounded'} bits (at most {MAX_WIDTH})")
        for f in t.fields:
            if f.width is not None and f.width > MAX_WIDTH:
                raise Unsupported(f"field '{t.name}.{f.name}' is {f.width} bits (at most {MAX_WIDTH})")
    if lay.union_stacks:
        raise Unsupported("header union stacks")
    for r in program.registers.values():
        if r.bitwidth > 64:
            raise Unsupported(f"register array '{r.name}' is {r.bitwidth} bits wide (at most 64)")
    for dep in program.json.get("deparsers", []):
        if dep.get("primitives"):
            raise Unsupported("deparser primitives")
    for f, info in lay.action_locals.items():
        if info.width is None or info.width > MAX_WIDTH:
            raise Unsupported(f"temporary '{f}' wider than {MAX_WIDTH} bits")


class CGenerator:
    def __init__(self, program: Program):
        check_program(program)
        self.ctx = ctx = Context(program)
        ex = Expressions(ctx)
        calculations = Calculations(ctx, ex)
        primitives = Primitives(ctx, ex, calculations)
        self.actions = Actions(ctx, ex, primitives)
        self.parser = Parser(ctx, ex, primitives)
        self.calculations = calculations
        self.deparser = Deparser(ctx)
        self.controls = Controls(ctx, ex, self.actions, Tables(ctx, ex, calculations, self.actions))
        self._statics_done = 0

    def generate(self) -> Native:
        ctx = self.ctx
        self.actions.define()
        self.parser.define()
        self.calculations.checksums()
        self.deparser.define()
        pipes = {pipe["name"]: self.controls.pipeline(pipe) for pipe in ctx.js.get("pipelines", [])}
        body = ctx.out
        ctx.out = []
        head = self._prelude()
        statics = list(ctx.statics)
        self._statics_done = len(statics)       # the rest: those the functions below add
        tail = self._program_functions(pipes)
        source = "\n".join(head + statics + [""] + body + tail) + "\n"
        return Native(source, ctx.tables, ctx.profiles, ctx.registers, ctx.counters, ctx.meters,
                      ctx.value_sets, dict(ctx.wide))

    def _prelude(self) -> list[str]:
        ctx, lay = self.ctx, self.ctx.lay
        size = lay.size
        wide_of = ["-1"] * size
        for s, i in ctx.wide.items():
            wide_of[s] = str(i)
        template = [str(v) if isinstance(v, int) else "0" for v in lay.template]
        # the first line names the generator as it stood when the text was fixed: the native
        # libraries already built (their cache is keyed on the text) stay valid
        return ["/* generated by softswitch/native/codegen.py: do not edit */",
                '#include "objects.h"', '#include "pipeline_support.h"', "",
                f"#define NSLOTS {size}", f"#define NWIDE {max(1, len(ctx.wide))}",
                "typedef struct ss_st { uint64_t s[NSLOTS]; ss_u128 w[NWIDE]; int err; } ss_st;",
                f"static const int16_t WIDE_OF[NSLOTS] = {{{', '.join(wide_of)}}};",
                f"static const uint64_t TEMPLATE[NSLOTS] = {{{', '.join(template)}}};",
                "static const ss_u128 NODATA[1] = {0};",
                '#include "pipeline_helpers.h"', ""]

    def _program_functions(self, pipes: dict[str, str]) -> list[str]:
        ctx, lay = self.ctx, self.ctx.lay
        meta_slots, meta_masks = [], []
        for m in META:
            if m.startswith("@"):
                slot = ctx.hidden[m[1:]]
                mask = (1 << 64) - 1
            else:
                slot = lay.intrinsic(INTRINSICS[m])
                mask = lay.intrinsic_mask(INTRINSICS[m]) if slot is not None else 0
                if slot is not None and slot in ctx.wide:
                    raise Unsupported(f"intrinsic '{m}' wider than 64 bits")
            meta_slots.append("-1" if slot is None else str(slot))
            meta_masks.append(f"{min(mask, (1 << 64) - 1):#x}ull")
        lines = [f"static const int32_t META_SLOT[SS_META_COUNT] = {{{', '.join(meta_slots)}}};",
                 f"static const uint64_t META_MASK[SS_META_COUNT] = {{{', '.join(meta_masks)}}};",
                 "size_t ss_state_size(void) { return sizeof(ss_st); }",
                 "void ss_state_init(void *st) { ss_st *S = st; memcpy(S->s, TEMPLATE, sizeof TEMPLATE); "
                 "memset(S->w, 0, sizeof S->w); S->err = 0; }",
                 "int ss_has(int m) { return m >= 0 && m < SS_META_COUNT && META_SLOT[m] >= 0; }",
                 "uint64_t ss_get(const void *st, int m) { return ss_has(m) ? ((const ss_st *)st)->s[META_SLOT[m]] : 0; }",
                 "void ss_set(void *st, int m, uint64_t v) { if (ss_has(m)) ((ss_st *)st)->s[META_SLOT[m]] = v; }",
                 "uint64_t ss_meta_mask(int m) { return ss_has(m) ? META_MASK[m] : 0; }"]
        for name in ("ingress", "egress"):
            fn = pipes.get(name)
            call = f"return {fn}(o, (ss_st *)st);" if fn else "return ((ss_st *)st)->err;"
            lines.append(f"int ss_{name}(ss_objects *o, void *st) {{ {call} }}")
        meta = lay.metadata_slots
        lines += ["void ss_clear_metadata(void *st) {", "    ss_st *S = st;"]
        lines += [f"    {ctx.slot(s, None).target} = 0;" if s not in ctx.wide else f"    S->w[{ctx.wide[s]}] = 0;"
                  for s in meta]
        lines += ["}"]
        lines += ["void ss_copy_field_list(int id, const void *src, void *dst) {",
                  "    const ss_st *A = src; ss_st *B = dst;", "    switch (id) {"]
        for fl_id, slots in ctx.p.field_lists.items():
            copies = []
            for s in slots:
                if s in ctx.wide:
                    copies.append(f"B->w[{ctx.wide[s]}] = A->w[{ctx.wide[s]}];")
                else:
                    copies.append(f"B->s[{s}] = A->s[{s}];")
            lines.append(f"    case {json_int(fl_id, 'field list id')}: {' '.join(copies)} break;")
        lines += ["    default: break;", "    }", "}", ""]
        lines += self._objects_new()
        lines += ["/* tests and the Python side: a slot's raw bits (signed: sign-extended), 128 bits as two words */",
                  "int ss_slot_count(void) { return NSLOTS; }",
                  "void ss_slot_read(const void *st, int slot, uint64_t *pair) {",
                  "    const ss_st *S = st; ss_u128 v = WIDE_OF[slot] >= 0 ? S->w[WIDE_OF[slot]] : (ss_u128)S->s[slot];",
                  "    pair[0] = (uint64_t)v; pair[1] = (uint64_t)(v >> 64); }",
                  "void ss_slot_write(void *st, int slot, const uint64_t *pair) {",
                  "    ss_st *S = st; if (WIDE_OF[slot] >= 0) S->w[WIDE_OF[slot]] = ((ss_u128)pair[1] << 64) | pair[0];",
                  "    else S->s[slot] = pair[0]; }",
                  "int ss_state_error(const void *st) { return ((const ss_st *)st)->err; }", ""]
        return lines

    def _objects_new(self) -> list[str]:
        ctx = self.ctx
        lines = []
        inits = []
        for i, name in enumerate(ctx.tables):
            t = ctx.p.tables[name]
            kinds = ctx.static("uint8_t", [str(_KIND[k.match_type]) for k in t.key])
            widths = ctx.static("uint16_t", [str(k.width) for k in t.key])
            for k in t.key:
                if k.width > MAX_WIDTH:
                    raise Unsupported(f"table '{name}': a key field of {k.width} bits")
            kind = _KIND.get(t.kind, 2)
            if kind == _KIND["lpm"] and t._lpm_index is None:
                kind = 2
            by_bytes = int(t.meter_array.by_bytes) if t.meter_array is not None else 0
            inits.append(f"{{ ss_table_desc d = {{{len(t.key)}, {kinds}, {widths}, {kind}, {t._lpm_index or 0}, "
                         f"{t.max_size}u, {by_bytes}}}; ss_table_init(&o->tables[{i}], &d); }}")
        for i, name in enumerate(ctx.registers):
            r = ctx.p.registers[name]
            inits.append(f"ss_register_init(&o->registers[{i}], {r.size}u, {r.bitwidth}u);")
        for i, name in enumerate(ctx.counters):
            inits.append(f"ss_counters_init(&o->counters[{i}], {ctx.p.counters[name].size}u);")
        for i, name in enumerate(ctx.meters):
            m = ctx.p.meters[name]
            inits.append(f"ss_meters_init(&o->meters[{i}], {m.size}u, {int(m.by_bytes)});")
        lines.append("ss_objects *ss_objects_new(void) {")
        lines.append(f"    ss_objects *o = ss_objects_alloc({len(ctx.tables)}, {len(ctx.profiles)}, "
                     f"{len(ctx.registers)}, {len(ctx.counters)}, {len(ctx.meters)}, {len(ctx.value_sets)});")
        lines += ["    " + ln for ln in inits] + ["    return o;", "}", ""]
        # the statics these need were added after the prelude was planned: emit them here
        return [*self.statics_tail(), *lines]

    def statics_tail(self) -> list[str]:
        done = self._statics_done
        self._statics_done = len(self.ctx.statics)
        return self.ctx.statics[done:]
