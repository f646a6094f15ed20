"""A pipeline (a control) as one C function: its nodes structured into nested branches where
the graph allows it (the Python path's controlflow.Structurer, written through CSyntax), the
rest as labelled nodes and gotos."""
from __future__ import annotations

from dataclasses import dataclass

from ...pipeline.controlflow import Block, Structurer, post_dominators
from ...pipeline.errors import ProgramError
from ...pipeline.untrusted import json_int
from .actions import Actions
from .context import SS_EXIT, Context
from .expressions import Expressions
from .tables import Tables


class CSyntax:
    """controlflow.Structurer's branches in C; past its nesting bound the rest of a control
    goes on in the control's goto form (``goto N<i>;``)."""

    def __init__(self, label):
        self.label = label
        self.used_fallback = False

    def if_(self, cond): return f"if ({cond}) {{"
    def if_not(self, cond): return f"if (!({cond})) {{"
    def else_(self): return "else {"
    def select(self, selector): return f"_i = {selector};"
    def case(self, first, values):
        test = " || ".join(f"_i == {v}" for v in values)
        return f"{'if' if first else 'else if'} ({test}) {{"
    def end(self): return "}"
    def empty(self): return ";"
    def leave(self): return None

    def fallback(self, node):
        self.used_fallback = True
        return f"goto {self.label(node)};"


@dataclass(eq=False)
class Controls:
    ctx: Context
    ex: Expressions
    actions: Actions
    tables: Tables

    def pipeline(self, pipe: dict) -> str:
        """Write the pipeline's function; returns its name."""
        ctx = self.ctx
        labels: dict[str, str] = {}
        blocks: dict[str, Block] = {}
        for t in pipe.get("tables", []):
            blocks[t["name"]] = self.tables.block(t)
        for c in pipe.get("conditionals", []):
            blocks[c["name"]] = Block([], [c.get("true_next"), c.get("false_next")], cond=self.ex.boolean(c["expression"]))
        for a in pipe.get("action_calls", []):
            blocks[a["name"]] = Block(self.actions.call(json_int(a["action_id"], "action id"), "NODATA"),
                                      [a.get("next_node")])
        for name in blocks:
            labels[name] = ctx.ident("N")
        for b in blocks.values():
            for s in b.succs:
                if s is not None and s not in blocks:
                    raise ProgramError(f"pipeline '{pipe['name']}' refers to unknown node '{s}'")
        init = pipe.get("init_table")
        if init is not None and init not in blocks:
            raise ProgramError(f"pipeline '{pipe['name']}' refers to unknown node '{init}'")

        def label(n):
            return "out" if n is None else labels[n]

        syntax = CSyntax(label)
        body = None
        ipdom = post_dominators(init, blocks)
        if ipdom is not None:
            body = Structurer(blocks, ipdom, syntax.fallback, budget=4 * len(blocks) + 64, syntax=syntax).emit(init)
        lines = ["ss_entry *e = NULL; int a = -1, r = 0, _i = 0; (void)e; (void)a; (void)_i;"]
        if body is not None:
            lines += body + ["goto out;"]
        else:
            syntax.used_fallback = True
            lines.append(f"goto {label(init)};")
        if syntax.used_fallback:          # the control as a graph of labelled nodes
            for name, b in blocks.items():
                lines.append(f"{labels[name]}:;")
                lines += _goto_node(b, label)
        lines += ["out:", f"if (r == {SS_EXIT}) r = SS_OK;", "if (!r) r = S->err;", "return r;"]
        fn = ctx.ident("PIPE")
        ctx.out.append(f"static int {fn}(ss_objects *o, ss_st *S) {{")
        ctx.out += ["    " + ln for ln in lines] + ["}", ""]
        return fn


def _goto_node(b: Block, label) -> list[str]:
    """A node of the goto form: its lines, then a goto to its successor."""
    lines = list(b.lines)
    if b.cond is not None:
        lines.append(f"if ({b.cond}) goto {label(b.succs[0])}; else goto {label(b.succs[1])};")
    elif b.selector is not None:
        lines.append(f"_i = {b.selector};")
        for vs, s in zip(b.cases, b.succs):
            lines.append(f"if ({' || '.join(f'_i == {v}' for v in vs)}) goto {label(s)};")
        lines.append(f"goto {label(b.succs[-1])};")
    else:
        lines.append(f"goto {label(b.succs[0])};")
    return lines
