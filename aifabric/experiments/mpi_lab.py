"""Open MPI across a running fabric's hosts: mpirun in the first host, one rank per host.

Mininet hosts are network namespaces of one machine with one hostname, so mpirun cannot reach
them by ssh, and Open MPI would take ranks that report the same hostname for one node (shared
memory between them, not the fabric). So mpirun runs inside the first host's namespace, with a
launcher agent (`--mca plm_rsh_agent`, written per run) that starts each remote daemon inside its
host's namespace (`mnexec -a PID`), and every daemon and mpirun get a UTS namespace of their own
named after their host and a mount namespace whose /etc/hosts names every host (`unshare --uts
--mount`, _private_names). The byte transfer layer is TCP over the hosts' fabric
addresses only (btl tcp,self; no shared memory), so MPI's traffic crosses the same shaped links
as ours. `mpi_yield_when_idle`: ranks waiting in MPI give up the CPU (8 ranks on 2 cores).

`run_mpi` returns a collectives_lab.GroupRun, so the benchmark reads MPI's reports like ours.
"""
from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
import time
from typing import Sequence

from aifabric.experiments.rank_processes import communicate, last_json
from aifabric.experiments.collectives_lab import GroupRun
from aifabric.lab.lab import Lab

PEER = "hostagent.collectives.mpi_peer"
FABRIC_NET = "10.0.0.0/8"  # the hosts' fabric addresses (topologies.addressing)


def available() -> str | None:
    """None when Open MPI and mpi4py are installed, else what is missing (by name)."""
    if shutil.which("mpirun") is None:
        return "mpirun not found (Debian's openmpi-bin; scripts/bootstrap.sh installs it)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py not importable (pip install -e '.[mpi]'; scripts/bootstrap.sh installs it)"
    return None


def _private_names(tmp: str, lab: Lab, hosts: Sequence[str]) -> str:
    """Shell that gives the command after it a hostname and name files of its own: /etc/hosts with
    every host's fabric address, and a resolv.conf with no name server. The machine's name server
    sits at a 10/8 address, which a host routes into the fabric: every name Open MPI looked up
    waited out the resolver's timeouts there (mpirun made no progress in 120 s)."""
    with open(os.path.join(tmp, "hosts"), "w") as f:
        f.write("127.0.0.1 localhost\n" + "".join(f"{lab.fabric.host(h).ip4.ip} {h}\n" for h in hosts))
    with open(os.path.join(tmp, "resolv.conf"), "w") as f:
        f.write("# no name server: the fabric's hosts are in /etc/hosts\n")
    return (f"mount --bind {tmp}/hosts /etc/hosts && mount --bind {tmp}/resolv.conf /etc/resolv.conf && "
            "hostname")


def _agent_script(lab: Lab, hosts: Sequence[str], names: str) -> str:
    """The launcher agent: `agent HOST COMMAND...` runs COMMAND in HOST's namespace, under HOST's name."""
    cases = "\n".join(f"  {shlex.quote(h)}) pid={lab.host(h).pid} ;;" for h in hosts)
    return f"""#!/bin/sh
# mpirun's launcher agent for the fabric's hosts (aifabric.experiments.mpi_lab)
host=$1; shift
case "$host" in
{cases}
  *) echo "mpi agent: unknown host $host" >&2; exit 2 ;;
esac
exec mnexec -a "$pid" unshare --uts --mount sh -c "{names} $host && $*"
"""


def mpirun_command(agent: str, hosts: Sequence[str], ops: Sequence[str], elements: Sequence[int], *, dtype: str = "float32",
                   repeat: int = 1, mca: Sequence[tuple[str, str]] = ()) -> list[str]:
    params = [("plm_rsh_agent", agent), ("btl", "tcp,self"), ("btl_tcp_if_include", FABRIC_NET),
              ("oob_tcp_if_include", FABRIC_NET), ("mpi_yield_when_idle", "1"), *mca]
    command = ["mpirun", "--allow-run-as-root", "-np", str(len(hosts)), "--host", ",".join(hosts),
               "--map-by", "node", "-x", "PATH", "-x", "PYTHONPATH"]
    for k, v in params:
        command += ["--mca", k, v]
    return command + [sys.executable, "-m", PEER, "--ops", *ops, "--elements", *map(str, elements), "--dtype", dtype,
                      "--repeat", str(repeat)]


def run_mpi(lab: Lab, hosts: Sequence[str], ops: Sequence[str], elements: Sequence[int], *, dtype: str = "float32",
            repeat: int = 1, deadline_s: float = 900.0, mca: Sequence[tuple[str, str]] = ()) -> GroupRun:
    """Open MPI's ``ops`` among ``hosts`` (rank order = the list's order), each for every length in
    ``elements``, in one mpirun."""
    run = GroupRun(list(hosts))
    missing = available()
    if missing:
        run.errors.append(f"mpi: {missing}")
        return run
    with tempfile.TemporaryDirectory(prefix="aifabric-mpi-") as tmp:
        names = _private_names(tmp, lab, hosts)
        agent = os.path.join(tmp, "agent")
        with open(agent, "w") as f:
            f.write(_agent_script(lab, hosts, names))
        os.chmod(agent, 0o755)
        mpirun = mpirun_command(agent, hosts, ops, elements, dtype=dtype, repeat=repeat, mca=mca)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        first = shlex.quote(hosts[0])
        t0 = time.monotonic()
        proc = lab.host(hosts[0]).popen(["unshare", "--uts", "--mount", "sh", "-c",
                                         f"{names} {first} && exec {shlex.join(mpirun)}"], env=env)
        out, err = communicate(proc, deadline_s)
        run.wall_s = time.monotonic() - t0
    result = last_json(out)
    if result is None or "ranks" not in result:
        said = [line for line in err.strip().splitlines() if line.strip()]
        run.errors.append(f"mpi {' '.join(ops)}: {said[-1] if said else f'no report (exit status {proc.returncode})'}")
        return run
    run.reports = result["ranks"]
    run.server = {"library": result.get("library", "")}
    for h, report in zip(hosts, run.reports):
        for c in report["calls"]:
            if not c["ok"]:
                run.errors.append(f"{h} {c['op']}:mpi {c['elements']}: wrong result "
                                  f"(error {c['max_error']:.3g} > bound {c['bound']:.3g})")
    return run
