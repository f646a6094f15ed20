"""The program's actions as C functions ``(o, S, D)``: their temporaries as C locals, their
primitives in order, ``_jump``s as gotos; and the call of an action by its id."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...pipeline.errors import ProgramError
from ...pipeline.primitives import is_jump
from ...pipeline.untrusted import json_int
from .context import Context
from .expressions import Expressions
from .primitives import Primitives


@dataclass(eq=False)
class Actions:
    ctx: Context
    ex: Expressions
    primitives: Primitives
    action_fn: dict[int, str | None] = field(default_factory=dict)   # action id -> function (None: nothing to do)

    def define(self) -> None:
        ctx, ex = self.ctx, self.ex
        for a in ctx.js.get("actions", []):
            aid = json_int(a["id"], "action id")
            prims = a.get("primitives", [])
            if not prims:
                self.action_fn[aid] = None
                continue
            fn = self.action_fn[aid] = ctx.ident("A")
            fields = ctx.p.action_locals.get(aid, ())
            ex.locals = {}
            decls = []
            for i, f in enumerate(fields):
                info = ctx.lay.action_locals[f]
                ex.locals[f] = (f"lv{i}", info)
                decls.append(f"{'ss_i128' if info.signed else 'ss_u128'} lv{i} = 0;")
            body: list[str] = []
            try:
                if any(is_jump(p) for p in prims):
                    body += self._with_jumps(prims)
                else:
                    for pr in prims:
                        body += self.primitives.primitive(pr)
            finally:
                ex.locals = {}
            ctx.out.append(f"static int {fn}(ss_objects *o, ss_st *S, const ss_u128 *D) {{  /* action {aid} */")
            ctx.out += ["    " + ln for ln in decls + body] + ["    return SS_OK;", "}", ""]

    def _with_jumps(self, prims: list[dict]) -> list[str]:
        """An action with ``_jump``/``_jump_if_zero``: a label before each primitive."""
        body: list[str] = []
        for i, pr in enumerate(prims):
            body.append(f"J{i}:;")
            if is_jump(pr):
                params = pr["parameters"]
                if pr["op"] == "_jump":
                    body.append(f"goto J{int(self.ex.compile(params[0]).const)};")
                else:
                    target = int(self.ex.compile(params[1]).const)
                    body.append(f"if ({self.ex.value(params[0]).src} == 0) goto J{target};")
            else:
                body += self.primitives.primitive(pr)
        body.append(f"J{len(prims)}:;")
        return body

    def call(self, aid: int, data: str) -> list[str]:
        """Run action ``aid`` with the data array ``data``; a failure ends the control."""
        fn = self.action_fn.get(aid, "missing")
        if fn == "missing":
            raise ProgramError(f"unknown action id {aid}")
        if fn is None:
            return []
        return [f"if ((r = {fn}(o, S, {data})) != 0) goto out;"]
