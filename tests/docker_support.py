"""What the Docker tests share: whether an engine can run here (and why not), the environment
that builds aifabric's images on this machine, and running a command with its error shown."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENGINE = REPO / "scripts" / "docker_engine.sh"


def skip_reason() -> str | None:
    """Why the Docker tests cannot run here, or None: starts dockerd when it is installed and
    not running, and makes the debian:bookworm base image when it is absent."""
    for tool in ("docker", "docker-compose"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/bootstrap.sh installs Debian's docker.io and docker-compose)"
    if os.geteuid() != 0 and subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        return "no Docker engine answers and only root may start one"
    ready = subprocess.run(["bash", str(ENGINE), "start"], capture_output=True, text=True, check=False)
    if ready.returncode != 0:
        return f"no Docker engine: {ready.stderr.strip().splitlines()[-1] if ready.stderr.strip() else 'dockerd did not start'}"
    base = subprocess.run(["bash", str(ENGINE), "base-image"], capture_output=True, text=True, check=False)
    if base.returncode != 0:
        return f"no debian:bookworm base image and none could be made: {base.stderr.strip()[-300:]}"
    return None


def build_env(**extra: str) -> dict[str, str]:
    """The environment for docker-compose: this machine's extra CA certificates (a TLS-inspecting
    proxy's) handed to the image build for pip, when there are any."""
    env = dict(os.environ, **extra)
    local_cas = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    if local_cas and "AIFABRIC_PIP_CERT_PEM" not in env:
        env["AIFABRIC_PIP_CERT_PEM"] = "\n".join(p.read_text().strip() for p in local_cas)
    return env


def run(*argv: str, env: dict[str, str] | None = None, timeout: float = 120, check: bool = True,
        cwd: Path = REPO) -> str:
    """``argv``'s standard output; AssertionError with its standard error when it fails."""
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr[-3000:]}")
    return result.stdout
