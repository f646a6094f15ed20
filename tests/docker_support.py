"""What the Docker tests share: whether an engine can run here (and why not), and running a
command with its error shown as a test failure."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from aifabric.containers.swarm import DockerError, command

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


def run(*argv: str, **options) -> str:
    """`aifabric.containers.swarm.command` with its failure an AssertionError (a test's failure)."""
    try:
        return command(*argv, **options)
    except DockerError as err:
        raise AssertionError(str(err)) from None


def compose_leftovers(project: str) -> dict[str, list[str]]:
    """The containers, networks and volumes Docker still has of compose project ``project``."""
    label = f"label=com.docker.compose.project={project}"
    return {kind: run("docker", *cmd, "--filter", label, "-q").split()
            for kind, cmd in (("containers", ["ps", "-a"]), ("networks", ["network", "ls"]),
                              ("volumes", ["volume", "ls"]))}
