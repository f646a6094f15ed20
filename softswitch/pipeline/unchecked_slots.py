"""Constant slots of the packet state read and written with no index check in the compiled path.

Cython indexes the packet state ``F`` (a list) directly, but checks each index against the
list's length first, through a helper the C compiler does not inline in functions as long as
the generated ones: about 6% of the fabric program's time per packet went to those calls.
Most indexes are constants the layout gave (``F[332]``), and ``F`` is always a copy of the
layout's template that keeps its length, so they cannot be out of range; statements whose
every subscript is such a constant are compiled inside ``with cython.boundscheck(False),
cython.wraparound(False):``. Every other subscript (action data ``D[i]``, slots computed at
run time, the lists of run-time objects, slices) keeps Cython's checks. The generated Python,
the reference, is unchanged.

That ``F`` keeps its length is checked, not assumed: a module with any store that could
change it is compiled with every check (``keeps_state_length``), and the helpers that copy
runs of slots refuse runs outside the state (helpers.copy_slots). The run-time objects the
code hands ``F`` to (calculations, selectors) only read it.
"""
from __future__ import annotations

import ast

from .helpers import ZEROS

UNCHECKED = [ast.withitem(ast.parse(f"cython.{d}(False)", mode="eval").body) for d in ("boundscheck", "wraparound")]


def without_index_checks_in(module: ast.Module, size: int) -> None:
    """``without_index_checks`` on every function of the generated ``module`` (changed in
    place), when no statement of it can change the packet state's length."""
    if keeps_state_length(module):
        for fn in module.body:
            if isinstance(fn, ast.FunctionDef):
                without_index_checks(fn, size)


def keeps_state_length(module: ast.Module) -> bool:
    """No ``del F[...]``, and every store to a slice of ``F`` is codegen's add_header,
    ``F[X + i:X + j] = _ZEROS[:k]`` (or ``[0] * k``) with j - i == k, ZEROS being k long."""
    for node in ast.walk(module):
        if isinstance(node, ast.Delete) and any(_indexes_state(t) for t in node.targets):
            return False
        if isinstance(node, (ast.AugAssign, ast.AnnAssign)) and _indexes_state(node.target) \
                and isinstance(node.target.slice, ast.Slice):
            return False
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if _indexes_state(target) and isinstance(target.slice, ast.Slice) \
                        and _run_length(target.slice) != _zeros_length(node.value):
                    return False
    return True


def _indexes_state(node: ast.AST) -> bool:
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "F"


def _run_length(s: ast.Slice) -> int | None:
    """j - i for ``X + i:X + j`` (or ``i:j``), None otherwise."""
    def split(e: ast.AST | None) -> tuple[str, int] | None:
        if isinstance(e, ast.Constant) and type(e.value) is int:
            return "", e.value
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and isinstance(e.right, ast.Constant) \
                and type(e.right.value) is int:
            return ast.unparse(e.left), e.right.value
        return None
    lo, hi = split(s.lower), split(s.upper)
    if s.step is not None or lo is None or hi is None or lo[0] != hi[0] or hi[1] < lo[1]:
        return None
    return hi[1] - lo[1]


def _zeros_length(value: ast.AST) -> int | None:
    """k for ``_ZEROS[:k]`` (k within ZEROS) or ``[0] * k``; None otherwise (never a run length)."""
    if (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id == "_ZEROS"
            and isinstance(value.slice, ast.Slice) and value.slice.lower is None and value.slice.step is None
            and isinstance(value.slice.upper, ast.Constant) and type(value.slice.upper.value) is int
            and 0 <= value.slice.upper.value <= len(ZEROS)):
        return value.slice.upper.value
    n = _zeros_list(value)
    return n if n is not None and n >= 0 else None


def without_index_checks(fn: ast.FunctionDef, size: int) -> None:
    """Wrap each maximal run of statements of ``fn`` whose subscripts are all constant slots of
    a list of known length (``list_lengths``; ``size``: the packet state's) in the unchecked
    block. ``fn`` is changed in place."""
    lengths = list_lengths(fn, size)
    if not lengths:
        return

    def unchecked(stmt: ast.stmt) -> bool:
        return all(is_constant_slot(n, lengths) for n in ast.walk(stmt) if isinstance(n, ast.Subscript))

    def rewrite(stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        run: list[ast.stmt] = []
        for stmt in [*stmts, None]:
            if stmt is not None and unchecked(stmt):
                run.append(stmt)
                continue
            if run:
                out.append(ast.With(items=UNCHECKED, body=run, type_comment=None))
                run = []
            if stmt is not None:          # checked itself; the blocks inside it may not be
                for block in ("body", "orelse", "finalbody"):
                    if isinstance(getattr(stmt, block, None), list):
                        setattr(stmt, block, rewrite(getattr(stmt, block)))
                for handler in getattr(stmt, "handlers", ()):
                    handler.body = rewrite(handler.body)
                out.append(stmt)
        return out

    fn.body = rewrite(fn.body)
    ast.fix_missing_locations(fn)


def list_lengths(fn: ast.FunctionDef, size: int) -> dict[str, int]:
    """The lists of ``fn`` whose length is known wherever they are indexed: the packet state
    ``F`` when it is the first parameter and never assigned (``size`` slots), and codegen's
    action locals ``_L`` when every assignment to it is ``_L = [0] * n`` (the smallest n).
    Neither in a function with a nested scope."""
    stores: dict[str, int] = {}
    made: list[int] = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) and node is not fn:
            return {}
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] = stores.get(node.id, 0) + 1
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["_L"]:
            n = _zeros_list(node.value)
            if n is not None:
                made.append(n)
    lengths = {}
    if [a.arg for a in fn.args.args][:1] == ["F"] and "F" not in stores:
        lengths["F"] = size
    if made and len(made) == stores.get("_L", 0):
        lengths["_L"] = min(made)
    return lengths


def is_constant_slot(node: ast.AST, lengths: dict[str, int]) -> bool:
    """``X[k]``, X a list of known length and k a constant inside it."""
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
            and node.value.id in lengths and isinstance(node.slice, ast.Constant)
            and type(node.slice.value) is int and 0 <= node.slice.value < lengths[node.value.id])


def _zeros_list(value: ast.AST) -> int | None:
    """n for ``[0] * n`` with n a constant."""
    if (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult) and isinstance(value.left, ast.List)
            and len(value.left.elts) == 1 and isinstance(value.left.elts[0], ast.Constant)
            and value.left.elts[0].value == 0 and type(value.left.elts[0].value) is int
            and isinstance(value.right, ast.Constant) and type(value.right.value) is int):
        return value.right.value
    return None
