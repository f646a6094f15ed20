"""A pipeline's control flow as one function: the JSON's node graph emitted as nested code.

BMv2 JSON describes a control as a graph of nodes (tables, conditionals, action calls), each
naming its successors. Run node by node, every packet pays a call per node, and p4c makes
many small ones (every action a control calls directly becomes a key-less table). Controls
have no loops, so the graph is acyclic, and it becomes structured code: a branching node
emits ``if``/``elif`` arms that each run up to the node where the arms meet again (the
branching node's immediate post-dominator), and the code goes on from there.

Each node is a ``Block``: its straight-line lines and how it picks its successor. The same
blocks also make the node functions the plain loop runs, so both paths share one source of
truth; the loop stays the fallback for graphs that would not structure within bounds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

END = None      # the successor of a node that ends the control

# Nesting beyond this continues through the node loop (Python caps indentation at 100).
MAX_NESTING = 40


@dataclass
class Block:
    """One control-flow node: ``lines`` run first, then the node branches.

    ``cond`` set: two-way, ``succs[0]`` when it holds, else ``succs[1]``.
    ``cases`` set: multi-way on the value of ``selector``; ``cases[i]`` are the values that go
    to ``succs[i]``, any other value to ``succs[-1]``. Otherwise ``succs`` has one node."""

    lines: list[str]
    succs: list[str | None]
    cond: str | None = None
    selector: str | None = None
    cases: list[tuple[int, ...]] = field(default_factory=list)

    def targets(self) -> set[str | None]:
        return set(self.succs)


def post_dominators(init: str | None, blocks: dict[str, Block]) -> dict[str, str | None] | None:
    """Immediate post-dominator of every node reachable from ``init`` (END where the arms
    only meet at the end); None if the graph has a cycle (never from p4c)."""
    order: list[str] = []          # reverse post-order of a DFS: successors after their node
    state: dict[str, int] = {}     # 1 on the DFS stack, 2 done
    if init is not END:
        stack: list[tuple[str, list]] = [(init, sorted(blocks[init].targets() - {END}))]
        state[init] = 1
        while stack:
            node, todo = stack[-1]
            if todo:
                nxt = todo.pop()
                s = state.get(nxt)
                if s == 1:
                    return None
                if s is None:
                    state[nxt] = 1
                    stack.append((nxt, sorted(blocks[nxt].targets() - {END})))
                continue
            stack.pop()
            state[node] = 2
            order.append(node)
    ipdom: dict[str, str | None] = {}
    depth: dict[str | None, int] = {END: 0}

    def meet(a: str | None, b: str | None) -> str | None:
        while a != b:
            if depth[a] >= depth[b]:
                a = ipdom[a]        # type: ignore[index]
            else:
                b = ipdom[b]        # type: ignore[index]
        return a

    for node in order:             # successors first: their post-dominators are known
        succs = list(blocks[node].targets())
        p = succs[0]
        for s in succs[1:]:
            p = meet(p, s)
        ipdom[node] = p
        depth[node] = depth[p] + 1
    return ipdom


class PythonSyntax:
    """How the Structurer writes its branches: Python's (the C generator has its own,
    native/codegen/controls.py): the arms are indented, nothing closes them."""

    def if_(self, cond: str) -> str:
        return f"if {cond}:"

    def if_not(self, cond: str) -> str:
        return f"if not ({cond}):"

    def else_(self) -> str:
        return "else:"

    def select(self, selector: str) -> str:
        return f"_i = {selector}"

    def case(self, first: bool, values: tuple[int, ...]) -> str:
        test = f"_i == {values[0]}" if len(values) == 1 else f"_i in {values!r}"
        return f"{'if' if first else 'elif'} {test}:"

    def end(self) -> str | None:
        return None

    def empty(self) -> str:
        return "pass"

    def leave(self) -> str | None:
        return "return"


class Structurer:
    """Emits the nodes reachable from a start node as nested lines (Python's, or another
    language's through ``syntax``).

    ``fallback(node)`` gives the source of a call that runs the rest of the control from
    ``node`` through the node loop (used past MAX_NESTING). ``budget`` bounds how many node
    bodies may be emitted, since a node reached from several arms that meet only later is
    emitted once per arm; past it ``emit`` returns None."""

    def __init__(self, blocks: dict[str, Block], ipdom: dict[str, str | None], fallback, budget: int,
                 syntax=None):
        self.blocks = blocks
        self.ipdom = ipdom
        self.fallback = fallback
        self.budget = budget
        self.syntax = syntax or PythonSyntax()
        self.lines: list[str] = []

    def emit(self, init: str | None) -> list[str] | None:
        try:
            self._run(init, END, 0)
        except _OverBudget:
            return None
        return self.lines

    def _out(self, depth: int, line: str | None) -> None:
        if line is not None:
            self.lines.append("    " * depth + line)

    def _arm(self, node: str | None, stop: str | None, depth: int) -> None:
        self._run(node, stop, depth + 1)
        self._out(depth, self.syntax.end())

    def _run(self, node: str | None, stop: str | None, depth: int) -> None:
        start = len(self.lines)
        sx = self.syntax
        while node is not END and node != stop:
            if depth > MAX_NESTING:
                self._out(depth, self.fallback(node))
                self._out(depth, sx.leave())
                return
            self.budget -= 1
            if self.budget < 0:
                raise _OverBudget
            b = self.blocks[node]
            for ln in b.lines:
                self._out(depth, ln)
            arms = set(b.succs)
            if len(arms) == 1:
                node = b.succs[0]
                continue
            join = self.ipdom[node]
            if b.cond is not None:
                yes, no = b.succs
                if yes == join:           # only the false arm does something
                    self._out(depth, sx.if_not(b.cond))
                    self._arm(no, join, depth)
                else:
                    self._out(depth, sx.if_(b.cond))
                    self._arm(yes, join, depth)
                    if no != join:
                        self._out(depth, sx.else_())
                        self._arm(no, join, depth)
            else:
                self._out(depth, sx.select(b.selector))
                default = b.succs[-1]
                first = True
                for values, succ in zip(b.cases, b.succs):
                    if succ == default:
                        continue          # the else arm takes it
                    self._out(depth, sx.case(first, values))
                    self._arm(succ, join, depth)
                    first = False
                self._out(depth, sx.else_())
                self._arm(default, join, depth)
            node = join
        if len(self.lines) == start:
            self._out(depth, sx.empty())


class _OverBudget(Exception):
    pass
