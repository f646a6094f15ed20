"""The program's actions as functions ``(F, D)``: their primitives (primitives.py), their
temporaries as local variables (action_locals.py), ``_jump``s as a small program counter loop;
and an action's lines for inlining where it runs with constant data."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ProgramError
from ..primitives import PrimitiveCompiler, is_jump, jump_target
from ..untrusted import comment, json_int
from .context import Context

# An action keeps up to this many temporaries in local variables, more in a list of its own:
# gcc's time and memory on a function grow steeply with its C variables (the aggregation
# action's 318 as locals took the fabric program's build past 8 minutes and 3.4 GB).
MAX_LOCAL_VARIABLES = 16
# A longer action is called, not copied into its table's code and into the structured control
# (the aggregation action's ~1,000 lines were there three times). Measured together with the
# locals above: the fabric program's compiled build 164 -> 123 s and 1.9 -> 1.7 GB.
MAX_INLINE_LINES = 64


@dataclass(eq=False)
class Actions:
    ctx: Context
    pc: PrimitiveCompiler
    _fns: dict[int, str] = field(default_factory=dict)            # action id -> function
    _empty: set[int] = field(default_factory=set)                 # ids of actions with no primitives: no function
    _bodies: dict[int, list[str]] = field(default_factory=dict)   # action id -> its lines, when they inline

    def name(self, action_id: int) -> str | None:
        """The generated function of the action with this JSON id; None for an action with
        nothing to do (no primitives): it has no function, and a table that picks it calls
        none (``_run_action``), a call less for each such table a packet crosses."""
        if action_id in self._empty:
            return None
        try:
            return self._fns[action_id]
        except (KeyError, TypeError):
            raise ProgramError(f"unknown action id {comment(action_id)}") from None

    def define(self) -> None:
        """A function for each action that does something."""
        for a in self.ctx.js.get("actions", []):
            aid = json_int(a["id"], f"id of action '{a['name']}'")
            if not a.get("primitives"):
                self._empty.add(aid)
                self._bodies[aid] = []
                continue
            self._fns[aid] = self.ctx.ident("_a")
            self._action(a, aid, self._fns[aid])

    def lines(self, action_id: int, data: tuple) -> list[str]:
        """An action run with constant data: its body inline, or (with jumps, or long) a call."""
        body = self._bodies.get(action_id)
        if body is None or len(body) > MAX_INLINE_LINES:
            return [f"{self.name(action_id)}(F, {tuple(data)!r})"]
        return ([f"D = {tuple(data)!r}"] if data else []) + body

    def _action(self, a: dict, aid: int, fn: str) -> None:
        o, ec = self.ctx.out, self.ctx.ec
        prims = a.get("primitives", [])
        o(f"def {fn}(F, D):  # {comment(a['name'])}")
        o.indent()
        # its temporaries out of the packet state, starting at metadata's 0 (action_locals.py)
        fields = self.ctx.obj.action_locals.get(aid, ())
        if len(fields) <= MAX_LOCAL_VARIABLES:
            ec.locals = {f: self.ctx.ident("_lv") for f in fields}
            start = [f"{v} = 0" for v in ec.locals.values()]
        else:
            ec.locals = {f: f"_L[{i}]" for i, f in enumerate(fields)}
            start = [f"_L = [0] * {len(fields)}"]
        try:
            if any(is_jump(p) for p in prims):
                o.block(start)
                self._with_jumps(prims)
            else:
                body = start + [ln for p in prims for ln in self.pc.compile(p)]
                o.block(body)
                self._bodies[aid] = body
        finally:
            ec.locals = {}
        o.dedent()
        o()

    def _with_jumps(self, prims: list[dict]) -> None:
        """Actions with ``_jump``/``_jump_if_zero`` run as a small program counter loop."""
        o = self.ctx.out
        end = len(prims)
        o("pc = 0")
        o(f"while pc < {end}:")
        o.indent()
        for i, p in enumerate(prims):
            o(f"{'if' if i == 0 else 'elif'} pc == {i}:")
            o.indent()
            if is_jump(p):
                cond, target = jump_target(p, self.ctx.ec)
                if cond is None:
                    o(f"pc = {target}")
                else:
                    o(f"pc = {target} if ({cond}) == 0 else {i + 1}")
            else:
                o.block(self.pc.compile(p))
                o(f"pc = {i + 1}")
            o.dedent()
        o.dedent()
