"""A pipeline (a control): a function per node for the node loop (the reference path), and
the pipeline's function, which runs the nodes as one structured function where the graph
allows it (controlflow.py) and through the node loop otherwise."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..controlflow import Block, Structurer, post_dominators
from ..errors import ProgramError
from ..untrusted import comment
from .actions import Actions
from .context import Context
from .tables import Tables


@dataclass(eq=False)
class Controls:
    ctx: Context
    actions: Actions
    tables: Tables
    fuse: bool                                                         # pipelines as structured functions
    pipeline_fns: dict[str, str] = field(default_factory=dict)         # pipeline name -> function
    _deferred_next: list[tuple[str, dict]] = field(default_factory=list)

    def define(self, pipe: dict) -> None:
        """Each node becomes a function (the node loop, the reference path); the pipeline
        itself runs the nodes as one structured function where the graph allows it."""
        ctx = self.ctx
        names: dict[str, str] = {}      # node name -> its function
        for t in pipe.get("tables", []):
            names[t["name"]] = ctx.ident("_t")
        for c in pipe.get("conditionals", []):
            names[c["name"]] = ctx.ident("_c")
        for a in pipe.get("action_calls", []):
            names[a["name"]] = ctx.ident("_ac")

        def node(n: str | None) -> str:
            if n is None:
                return "None"
            if n not in names:
                raise ProgramError(f"pipeline '{pipe['name']}' refers to unknown node '{n}'")
            return names[n]

        blocks: dict[str, Block] = {}
        comments: dict[str, str] = {}
        for t in pipe.get("tables", []):
            blocks[t["name"]] = self.tables.block(t)
            comments[t["name"]] = f"table {comment(t['name'])}"
        for c in pipe.get("conditionals", []):
            blocks[c["name"]] = Block([], [c.get("true_next"), c.get("false_next")],
                                      cond=ctx.ec.boolean(c["expression"]))
            comments[c["name"]] = comment(c["name"])
        for a in pipe.get("action_calls", []):
            blocks[a["name"]] = Block(self.actions.lines(a["action_id"], ()), [a.get("next_node")])
            comments[a["name"]] = comment(a["name"])
        for name, b in blocks.items():
            for s in b.succs:
                node(s)              # every successor must exist
            self._node_function(names[name], comments[name], b, node)

        o = ctx.out
        init = pipe.get("init_table")
        node(init)
        fn = self.pipeline_fns[pipe["name"]] = ctx.ident("_pipe")
        body = None
        if self.fuse:
            ipdom = post_dominators(init, blocks)
            if ipdom is not None:
                body = Structurer(blocks, ipdom, lambda n: f"_run_nodes(F, {node(n)})",
                                  budget=4 * len(blocks) + 64).emit(init)
        o(f"def {fn}(F):  # pipeline {comment(pipe['name'])}")
        o.indent()
        o("try:")
        if body is not None:
            o.indent()
            o.block(body)
            o.dedent()
        else:
            o(f"    _run_nodes(F, {node(init)})")
        o("except _Exit:")
        o("    pass")
        o.dedent()
        o()

    def _node_function(self, fn: str, what: str, b: Block, node) -> None:
        """The node as a function of the node loop: its lines, then its successor's function."""
        o = self.ctx.out
        if b.selector is not None:
            nx = self.ctx.ident("_nx")
            o(f"{nx} = {{}}  # filled below, once every node exists")
            self._deferred_next.append((nx, {v: node(s) for vs, s in zip(b.cases, b.succs) for v in vs}))
        o(f"def {fn}(F):  # {what}")
        o.indent()
        o.block(b.lines)
        if b.cond is not None:
            o(f"return {node(b.succs[0])} if {b.cond} else {node(b.succs[1])}")
        elif b.selector is not None:
            o(f"return {nx}.get({b.selector}, {node(b.succs[-1])})")
        else:
            o(f"return {node(b.succs[0])}")
        o.dedent()
        o()

    def finish_next_maps(self) -> None:
        """Fill the maps from an action's id to the next node's function, now that every node
        function exists."""
        o = self.ctx.out
        for nx, mapping in self._deferred_next:
            items = ", ".join(f"{aid}: {fn}" for aid, fn in mapping.items())
            o(f"{nx}.update({{{items}}})")
