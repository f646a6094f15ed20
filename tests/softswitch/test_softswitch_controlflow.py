"""softswitch's structured controls: a control's node graph run as one nested function must
visit exactly the nodes the node-by-node loop visits, on any acyclic graph.

Random graphs stand for p4c's: each node records itself and branches two ways (a condition)
or many ways (the action a table ran), arms meet again at some later node or only at the
end. Every input is run both ways and the visited sequences compared.
"""
from __future__ import annotations

import itertools
import random

import pytest

from softswitch.pipeline.controlflow import (
    MAX_NESTING,
    Block,
    Structurer,
    post_dominators,
)
from softswitch.pipeline.helpers import run_nodes


def random_graph(rng: random.Random, n: int) -> dict[str, Block]:
    """Nodes n0..n{n-1}; a node only goes to later ones (or the end), so the graph is acyclic.
    ``T`` is the trace; ``X`` the input bits a node branches on."""
    blocks = {}
    for i in range(n):
        later = [f"n{j}" for j in range(i + 1, n)] + [None]
        lines = [f"T.append({i})"]
        kind = rng.random()
        if kind < 0.4:
            blocks[f"n{i}"] = Block(lines, [rng.choice(later)])
        elif kind < 0.8:
            blocks[f"n{i}"] = Block(lines, [rng.choice(later), rng.choice(later)], cond=f"X[{i}] & 1")
        else:
            arms = rng.sample(later, min(len(later), 3))
            blocks[f"n{i}"] = Block(lines, arms, selector=f"X[{i}] % 4",
                                    cases=[(0,), (1, 2)][:len(arms) - 1])
    return blocks


def compile_both(blocks: dict[str, Block], init: str, budget: int = 10_000):
    """(structured function or None, node-loop function) of the graph."""
    fns = {name: f"_f{name}" for name in blocks}
    src = ["def _g(x): return None"]
    nxmaps = []
    for name, b in blocks.items():
        src.append(f"def {fns[name]}(F):")
        src += ["    " + ln for ln in b.lines]
        if b.cond is not None:
            src.append(f"    return {fns.get(b.succs[0])} if {b.cond} else {fns.get(b.succs[1])}")
        elif b.selector is not None:
            m = {v: fns.get(s) for vs, s in zip(b.cases, b.succs) for v in vs}
            nxmaps.append(m)
            src.append(f"    return {{{', '.join(f'{v}: {f}' for v, f in m.items())}}}"
                       f".get({b.selector}, {fns.get(b.succs[-1])})")
        else:
            src.append(f"    return {fns.get(b.succs[0])}")
    ipdom = post_dominators(init, blocks)
    assert ipdom is not None
    body = Structurer(blocks, ipdom, lambda n: f"_run_nodes(F, {fns[n]})", budget).emit(init)
    if body is not None:
        src.append("def structured(F):")
        src += ["    " + ln for ln in body]
    # the generated functions read the trace and the input through F = (T, X)
    text = "\n".join(src).replace("(F):", "(F):\n    T, X = F")
    ns = {"_run_nodes": run_nodes}
    exec(compile(text, "<test graph>", "exec"), ns)
    return ns.get("structured"), (lambda F: run_nodes(F, ns[fns[init]]))


@pytest.mark.parametrize("seed", range(40))
def test_structured_visits_what_the_loop_visits(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 30)
    blocks = random_graph(rng, n)
    structured, loop = compile_both(blocks, "n0")
    assert structured is not None
    for _ in range(60):
        x = [rng.randrange(8) for _ in range(n)]
        t1, t2 = [], []
        structured((t1, x))
        loop((t2, x))
        assert t1 == t2, f"seed {seed}, input {x}"


def test_post_dominators_of_a_diamond():
    blocks = {"a": Block([], ["b", "c"], cond="1"), "b": Block([], ["d"]), "c": Block([], ["d"]),
              "d": Block([], [None])}
    assert post_dominators("a", blocks) == {"d": None, "b": "d", "c": "d", "a": "d"}


def test_a_cycle_has_no_structure():
    blocks = {"a": Block([], ["b"]), "b": Block([], ["a", None], cond="1")}
    assert post_dominators("a", blocks) is None


def test_over_budget_gives_up():
    rng = random.Random(7)
    blocks = random_graph(rng, 30)
    structured, _ = compile_both(blocks, "n0", budget=3)
    assert structured is None


def test_deep_nesting_continues_through_the_node_loop():
    """A chain of conditions each ending the control on one arm nests one level per node;
    past MAX_NESTING the rest runs node by node, with the same visits."""
    n = MAX_NESTING + 10
    blocks = {f"n{i}": Block([f"T.append({i})"], [f"n{i + 1}" if i + 1 < n else None, None], cond=f"X[{i}]")
              for i in range(n)}
    structured, loop = compile_both(blocks, "n0")
    for x in itertools.chain([[1] * n], ([1] * k + [0] + [1] * (n - k - 1) for k in range(0, n, 7))):
        t1, t2 = [], []
        structured((t1, x))
        loop((t2, x))
        assert t1 == t2
