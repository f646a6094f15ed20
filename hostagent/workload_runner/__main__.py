"""`python -m hostagent.workload_runner --rank R --plan plan.json`: one rank of a workload.

plan.json (written by aifabric.experiments.train_runner): {"addresses": [ip per rank], "groups":
[[ranks], ...] (a process group each; its index sets its UDP port and id), "ops": [per rank, the
op dicts of aifabric.workloads], "iterations": N, "base_port": P (every group's members bind P + the group's index), optionally
"ports": [[each member's port] per group] instead, "aggregation": {rank:
{"group", "job_id", "worker_id", "aggregator", "slots", optionally "frame_values" (64 if not)}}: that
group's all-reduces are summed in the switches by the rank's in-network job (one a rank: its worker
binds the aggregation port), every other collective by ring}, and optionally the transport's
"window" (packets in flight per link), "rto_s" (first retransmission timeout) and "agg_timeout_s"
(in-network chunk resend timeout): on rate-limited links the lab sets them to what a full window takes through one link,
as shorter ones resend what is only queued, and "rocev2" (the groups' packets RoCEv2-like, for the
host agents' PLB and DCQCN) with "rate_control_port" (where DCQCN's rates arrive), and "lossless"
({"dscp", "priority", "pause": {rank: MAP_ID:HOST_ID}}: every group's packets in that traffic
class, held while the host's class is paused)}, "qps" and "qp_ports" ([[each member's source ports
of its queue pairs after the first] per group]), and "start" (the iteration to begin with: a job
restarted from its checkpoint) and "checkpoint" ({"every": N, "dir": D}: each rank saves the
iteration it begins to D every N iterations, hostagent.workload_runner.checkpoint). Every stream runs on its own
thread, an op starting once its deps are done and the stream's previous op ended; a barrier of
all ranks starts each iteration. Prints one JSON report: per iteration, each op's start and end
(seconds from the iteration's start) and the accounting of hostagent.workload_runner.accounting.
A failed collective ends the run with its error named in the report and exit status 1.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import zlib
from dataclasses import replace

import numpy as np

from hostagent.collectives.aggregation.protocol import AGG_UDP_PORT, DEFAULT_FRAME_VALUES
from hostagent.collectives.aggregation.worker import JobConfig
from hostagent.collectives.group import ProcessGroup
from hostagent.collectives.reliable import CollectiveError, TransportConfig
from hostagent.congestion import CcSettings
from hostagent.stack_dump import dump_stacks_on_term
from hostagent.workload_runner import checkpoint, progress
from hostagent.workload_runner.accounting import split

ELEMENT = 4   # float32: emulated bytes become this many-byte elements
WINDOW = 64                   # the library's defaults, for links not limited: packets in flight per link,
DEFAULT_RTO_S = 0.03          # first retransmission timeout,
DEFAULT_AGG_TIMEOUT_S = 0.1   # in-network chunk resend timeout
STREAM_POLL_S = 0.1           # how often a rank waiting on its streams looks for a failed one
GROUP_CLOSE_S = 8.0           # the most a group's close takes: 5 s for its call thread, 1 to flush, 2 for its transport


class Rank:
    def __init__(self, rank: int, plan: dict, timeout: float, silent_after: float) -> None:
        self.rank = rank
        self.silent_after = silent_after
        self.ops = plan["ops"][rank]
        ips, base = plan["addresses"], plan["base_port"]
        self.groups: dict[tuple[int, ...], ProcessGroup] = {}
        job = plan.get("aggregation", {}).get(str(rank))
        window, rto = plan.get("window", WINDOW), plan.get("rto_s", DEFAULT_RTO_S)
        agg_timeout = plan.get("agg_timeout_s", DEFAULT_AGG_TIMEOUT_S)
        lossless = plan.get("lossless")       # the ranks' traffic class, and their host's PFC state to honour
        klass = {} if lossless is None else {"dscp": lossless["dscp"], "priority": lossless["priority"],
                                              "pause": lossless["pause"].get(str(rank))}
        transport = TransportConfig(window=window, rto_s=rto, silent_after_s=silent_after,
                                    rocev2=plan.get("rocev2", False), rate_control_port=plan.get("rate_control_port", 0),
                                    repath=plan.get("repath", False),
                                    cc=CcSettings(**plan["cc"]) if plan.get("cc") else None,
                                    qps=plan.get("qps", 1), **klass)
        for index, members in enumerate(plan["groups"]):
            if rank in members:
                in_network = job is not None and job["group"] == index
                ports = plan["ports"][index] if "ports" in plan else [base + index] * len(members)
                own = (replace(transport, qp_ports=tuple(plan["qp_ports"][index][members.index(rank)]))
                       if "qp_ports" in plan else transport)
                self.groups[tuple(members)] = ProcessGroup(
                    members.index(rank), [(ips[m], p) for m, p in zip(members, ports)], group_id=index + 1,
                    timeout_s=timeout, transport=own,
                    aggregation=_job_config(job, len(members), ips[rank], agg_timeout) if in_network else None)
        self.world = self.groups[tuple(range(len(ips)))]
        self.start = plan.get("start", 0)
        self.checkpoint = plan.get("checkpoint")

    def close(self) -> None:
        for pg in self.groups.values():
            pg.close()

    def close_within(self, wait_s: float) -> str | None:
        """Close the groups, waiting at most ``wait_s``; what did not close, by name (None: all
        did). A native engine whose thread had stopped (it sent nothing more, heartbeats
        included) kept its close waiting for that thread for good, so its rank never reported."""
        closing = threading.Thread(target=self.close, name="close", daemon=True)
        closing.start()
        closing.join(wait_s)
        if not closing.is_alive():
            return None
        paths = ", ".join(self.host_paths())
        return (f"the transport did not close within {wait_s:g} s (host path {paths}): a stuck engine "
                f"thread, a host path bug")

    def resent(self) -> dict[str, int]:
        """Packets this rank sent again, summed over its groups: ``transport`` (ring, all-to-all,
        point to point) and ``in_network`` (aggregation frames whose result came too late)."""
        return {"transport": sum(pg.transport.stats.retransmissions for pg in self.groups.values()),
                "in_network": sum(pg.in_network.totals.retransmissions
                                  for pg in self.groups.values() if pg.in_network is not None)}

    def paused_s(self) -> float:
        """How long PFC held this rank's sends, summed over its groups (0 without a lossless class)."""
        return round(sum(getattr(pg.transport, "paused_s", 0.0) for pg in self.groups.values()), 3)

    def repaths(self) -> int:
        """How often this rank's flows moved to another path, summed over its groups (0 without repath)."""
        return sum(pg.transport.host_path_stats().get("repaths", 0) for pg in self.groups.values())

    def cc(self) -> dict | None:
        """With a congestion control in the transport: its name and its figures summed over this
        rank's groups (acknowledgements it took, timeouts it was told, time sends waited for
        pacing); None without."""
        stats = [st for pg in self.groups.values() if "cc" in (st := pg.transport.host_path_stats())]
        if not stats:
            return None
        return {"name": stats[0]["cc"], "samples": sum(st["cc_samples"] for st in stats),
                "losses": sum(st["cc_losses"] for st in stats),
                "paced_s": round(sum(st["cc_paced_s"] for st in stats), 3)}

    def host_paths(self) -> list[str]:
        """Each group's host path (native or python)."""
        return sorted({pg.transport.host_path for pg in self.groups.values()})

    def _pair(self, op: dict) -> tuple[ProcessGroup, int]:
        a, b = op["group"]
        pg = self.groups[tuple(sorted((a, b)))]
        return pg, 0 if (b if op["kind"] == "send" else a) == min(a, b) else 1

    @staticmethod
    def members(op: dict) -> list[int]:
        """The op's group in the order its process group numbers them (a pair's group is sorted)."""
        return sorted(op["group"]) if op["kind"] in ("send", "recv") else list(op["group"])

    @classmethod
    def op_error(cls, op: dict, exc: Exception) -> str:
        """The error of an op, naming the rank it blames by its global number (a group's own errors
        number ranks within the group)."""
        members = cls.members(op)
        blamed = getattr(exc, "peer", None)
        who = f" (global rank {members[blamed]})" if blamed is not None and blamed < len(members) else ""
        return f"op {op['id']} {op['name']} (group of global ranks {members}): {type(exc).__name__}: {exc}{who}"

    def _run_op(self, op: dict) -> None:
        kind, n = op["kind"], max(1, op["emulated_bytes"] // ELEMENT)
        if kind == "compute":
            time.sleep(op["emulated_seconds"])
            return
        if kind in ("send", "recv"):
            pg, peer = self._pair(op)
            tag = zlib.crc32(op["key"].encode()) & 0xFFFFF
            if kind == "send":
                pg.send(np.zeros(n, np.float32), peer, tag)
            else:
                pg.recv(peer, tag)
            return
        pg = self.groups[tuple(op["group"])]
        size = len(op["group"])
        if kind == "all_reduce":
            pg.all_reduce(np.zeros(n, np.float32), algo="in_network" if pg.in_network is not None else "ring")
        elif kind == "reduce_scatter":
            pg.reduce_scatter(np.zeros(n, np.float32), algo="ring")
        elif kind == "all_gather":
            pg.all_gather(np.zeros(max(1, n // size), np.float32), algo="ring")
        elif kind == "all_to_all":
            pg.all_to_all([np.zeros(max(1, n // size), np.float32) for _ in range(size)])
        elif kind == "broadcast":
            pg.broadcast(np.zeros(n, np.float32), root=0)
        else:
            raise ValueError(f"op {op['id']}: unknown kind {kind!r}")

    def iteration(self, number: int = 0, progress_file: str | None = None) -> dict:
        """One iteration, after a barrier (every rank has finished the one before); its ``number``
        is then noted in ``progress_file`` and, where checkpointed, saved as this rank's checkpoint."""
        self.world.barrier()
        t0 = time.monotonic()
        if progress_file:
            progress.note(progress_file, number, t0)
        if self.checkpoint and number > self.start and number % self.checkpoint["every"] == 0:
            checkpoint.save(self.checkpoint["dir"], self.rank, number)
        done = {op["id"]: threading.Event() for op in self.ops}
        times: dict[int, tuple[float, float]] = {}
        errors: list[str] = []
        streams: dict[str, list[dict]] = {}
        for op in self.ops:
            streams.setdefault(op["stream"], []).append(op)

        def run_stream(ops: list[dict]) -> None:
            for op in ops:
                for d in op["deps"]:
                    while not done[d].wait(0.5):
                        if errors:
                            return
                if errors:
                    return
                start = time.monotonic()
                try:
                    self._run_op(op)
                except (CollectiveError, ValueError, TimeoutError) as exc:
                    errors.append(self.op_error(op, exc))
                    return
                times[op["id"]] = (start - t0, time.monotonic() - t0)
                done[op["id"]].set()

        threads = [threading.Thread(target=run_stream, args=(ops,), daemon=True) for ops in streams.values()]
        for t in threads:
            t.start()
        self._join(threads, errors)
        if errors:
            raise RuntimeError("; ".join(list(errors)))
        end = max(e for _, e in times.values())
        ops = [{"id": op["id"], "kind": op["kind"], "stream": op["stream"], "name": op["name"],
                "start": times[op["id"]][0], "end": times[op["id"]][1]} for op in self.ops]
        return {"t0": t0, "ops": ops, **split(ops, 0.0, end)}     # t0: monotonic, to place failures

    def _join(self, threads: list[threading.Thread], errors: list[str]) -> None:
        """Wait for the streams; once one failed, the others at most ``silent_after`` more (what a
        silent peer takes to be named), not until their ops' own deadlines: an op waiting on a
        peer never heard from (dead before its first packet) waits the whole call timeout, which
        left a rank still running at its launcher's deadline. The streams left are daemons."""
        given_up_at = None
        for t in threads:
            while t.is_alive():
                t.join(STREAM_POLL_S)
                if errors and given_up_at is None:
                    given_up_at = time.monotonic() + self.silent_after
                if given_up_at is not None and time.monotonic() > given_up_at:
                    return


def _job_config(job: dict, members: int, ip: str, timeout: float) -> JobConfig:
    return JobConfig(job_id=job["job_id"], worker_id=job["worker_id"], num_workers=members,
                     aggregator=(job["aggregator"], AGG_UDP_PORT), slots=job["slots"], bind=(ip, AGG_UDP_PORT),
                     timeout=timeout, max_retries=200, frame_values=job.get("frame_values", DEFAULT_FRAME_VALUES))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m hostagent.workload_runner", description=__doc__.splitlines()[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--plan", required=True)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--silent-after", type=float, default=5.0)
    p.add_argument("--progress", metavar="FILE", help="append each iteration's number and time to FILE as it "
                                                     "begins, past its barrier (hostagent.workload_runner.progress)")
    args = p.parse_args(argv)
    dump_stacks_on_term()
    with open(args.plan) as f:
        plan = json.load(f)
    job = plan.get("aggregation", {}).get(str(args.rank))
    report: dict = {"rank": args.rank, "in_network_group": job["group"] if job else None, "iterations": []}
    rank = Rank(args.rank, plan, args.timeout, args.silent_after)
    try:
        for i in range(rank.start, plan["iterations"]):
            report["iterations"].append(rank.iteration(i, args.progress))
    except CollectiveError as exc:        # the iteration's barrier, over the world: ranks are global
        report["error"] = f"iteration {rank.start + len(report['iterations'])} barrier: {type(exc).__name__}: {exc}"
    except RuntimeError as exc:
        report["error"] = f"iteration {rank.start + len(report['iterations'])}: {exc}"
    finally:
        report["resent"] = rank.resent()
        report["paused_s"] = rank.paused_s()
        report["repaths"] = rank.repaths()
        report["cc"] = rank.cc()
        report["host_paths"] = rank.host_paths()
        stuck = rank.close_within(GROUP_CLOSE_S * len(rank.groups))
        if stuck:
            report["error"] = "; ".join(filter(None, (report.get("error"), stuck)))
    report["ok"] = "error" not in report
    print(json.dumps(report), flush=True)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
