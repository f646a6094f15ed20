"""Helper processes a traffic tool starts in a host (Mininet node or namespace): stopping them
and reading the JSON result they print last. Shared by `hostagent.traffic.drive` and
`aifabric.lab.traffic`."""

from __future__ import annotations

import json
import subprocess


def stop(proc, timeout: float = 1.0) -> None:
    """Kill a helper process started in a host and reap it, waiting at most ``timeout`` s (its
    results, if any, are already read; a lab's teardown kills whatever its hosts still run)."""
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass


def json_result(proc, what: str):
    """The JSON object a helper process prints last (waits for it to finish)."""
    out, err = proc.communicate()
    text = out.decode() if isinstance(out, bytes) else out
    try:
        return json.loads(text.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"{what} failed: {(err or b'').decode(errors='replace')[-500:]}") from None
