"""Generate one Python module from a BMv2 JSON program.

Everything per packet is plain generated code: parser states, actions, control-flow nodes,
the deparser and checksums. Run-time objects (tables, registers, calculations...) are bound
into the module's namespace under generated names, so the code calls them directly. The
generated source is kept (``Program.source``) so it can be read when something looks wrong.

The JSON is untrusted input: every identifier in the source is made here (a prefix and a
counter), names appear only as `comment` text, numbers only after `json_int` (see untrusted.py).

Each concern is a part of its own sharing one Context (the lines, the namespace, the names):
calculations and checksums, actions, the parser, the deparser, tables and controls; this
module puts them together in the module's order and runs the result.
"""
from __future__ import annotations

from typing import Any

from ..errors import ProgramError
from ..layout import Layout
from ..primitives import PrimitiveCompiler
from .actions import Actions
from .calculations import Calculations
from .context import Context
from .controls import Controls
from .deparser import Deparser
from .parser import Parser
from .support import set_valid_union
from .tables import Tables


class CodeGenerator:
    def __init__(self, js: dict, layout: Layout, objects: Any, fuse: bool = True):
        self.ctx = Context(js, layout, objects)
        self.calculations = Calculations(self.ctx)
        pc = PrimitiveCompiler(layout, self.ctx.ec, objects, self.calculations.output)
        self.actions = Actions(self.ctx, pc)
        self.parser = Parser(self.ctx, pc)
        self.deparser = Deparser(self.ctx, pc)
        self.controls = Controls(self.ctx, self.actions, Tables(self.ctx, pc, self.actions, self.calculations),
                                 fuse)
        self.errors = self.ctx.errors
        self.calculation_inputs = self.calculations.inputs   # calculation name -> input function
        self.calculation_direct = self.calculations.direct   # calculation name -> value function (csum16)
        self.pipeline_fns = self.controls.pipeline_fns       # pipeline name -> function
        self.defined_names: frozenset[str] = frozenset()   # set by generate()

    def action_name(self, action_id: int) -> str | None:
        """The generated function of the action with this JSON id (None: it does nothing)."""
        return self.actions.name(action_id)

    def generate(self) -> tuple[str, dict[str, Any]]:
        """The module's source and the namespace it ran in."""
        ctx = self.ctx
        if ctx.obj.union_siblings:
            sib = ctx.obj.union_siblings
            ctx.ns["_set_valid"] = lambda F, b: set_valid_union(F, b, sib)
        self.calculations.define()
        self.actions.define()
        self.parser.define()
        self.calculations.checksums()
        self.deparser.define()
        for pipe in ctx.js.get("pipelines", []):
            self.controls.define(pipe)
        self.controls.finish_next_maps()
        src = ctx.out.text()
        try:
            code = compile(src, "<softswitch pipeline>", "exec")
        except SyntaxError as e:  # a bug in the generator, never the user's
            raise ProgramError(f"internal error: generated code does not compile: {e}") from e
        bound = set(ctx.ns)
        exec(code, ctx.ns)
        self.defined_names = frozenset(ctx.ns) - bound      # what the generated module defines
        return src, ctx.ns
