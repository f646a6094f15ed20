"""What the host agents need from the machine, checked before anything starts them."""
from __future__ import annotations

import os
from pathlib import Path


def bcc_missing() -> str | None:
    """Why host agents cannot run here (root, bcc, kernel headers), or None."""
    if os.geteuid() != 0:
        return "needs root (BPF, TC, network namespaces)"
    try:
        import bcc  # noqa: F401
    except ImportError:
        return ("bcc is not importable (Debian's python3-bpfcc, seen by a venv made with "
                "--system-site-packages)")
    headers = Path(f"/lib/modules/{os.uname().release}/build")
    if not headers.exists():
        return f"no kernel headers at {headers} for bcc (scripts/bootstrap.sh links them)"
    return None
