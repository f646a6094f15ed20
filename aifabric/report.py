"""Plain-text tables and JSON output for the demos and benchmarks."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> str:
    """An aligned text table; numbers right-aligned, text left-aligned."""
    cells = [[_fmt(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [all(_is_number(row[i]) for row in rows) if rows else False for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [title] if title else []
    out += [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
    return str(v)


def write_json(path: str | Path, data: dict) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def progress(message: str) -> None:
    """One line of progress on standard error (stdout keeps the results)."""
    print(f"... {message}", file=sys.stderr, flush=True)


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (no display here)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, path: str | Path) -> Path:
    """Lay out, write (PNG, parents made) and close a figure; returns the path."""
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=110)
    pyplot().close(fig)
    return p
