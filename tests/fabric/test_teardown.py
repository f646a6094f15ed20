"""Teardown: SIGINT/SIGTERM at any point of bring-up, traffic and teardown, once or twice in a
row, leave no switch process, interface, host namespace or listening port behind, and the
command says "everything was torn down" only when that is true.

What is left is counted here with the system's own views (``ip``, ``ss``, /proc), not with
`emulation.cleanup.leftovers`, so a blind spot there cannot hide a leftover here.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aifabric.lab.interrupts import WAIT_NOTICE, SignalGate, Terminated, shielded
from aifabric.lab.named_labs import RUN_DIRS as NAMED_LABS_RUN_DIRS
from topologies.fabric import fat_tree, leaf_spine
from emulation.cleanup import HOST_NAME, SWITCH_NAME, cleanup, leftovers
from emulation.p4switch import RUN_DIR
from emulation.procs import LAB_MARKER
from emulation.testbed import free_tcp_port

AIFABRIC = str(Path(sys.executable).parent / "aifabric")
TORN_DOWN = "everything was torn down"
FABRIC_NODE = re.compile(rf"{SWITCH_NAME}|{HOST_NAME}")
FABRIC_INTF = re.compile(rf"(?:{SWITCH_NAME}|{HOST_NAME})-eth\d+|tnet")

# the nodes of every fabric these tests bring up
TEST_NODES = sorted({n for fab in (fat_tree(2), fat_tree(4), leaf_spine(2, 1, 1))
                     for n in [*(s.name for s in fab.switches), *(h.name for h in fab.hosts)]} | {"tnet"})

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths, signals to fabrics)")


# --- what is left, seen independently ------------------------------------------------------

def _argv(pid: str) -> list[str]:
    try:
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return []


def _pids() -> list[str]:
    """Processes but this one, and but those of a named lab (`aifabric --lab NAME`, in a
    namespace of its own beside the suite's): their environment names its run directory."""
    named = str(NAMED_LABS_RUN_DIRS.resolve()).encode()
    return [p for p in os.listdir("/proc") if p.isdigit() and p != str(os.getpid())
            and LAB_MARKER.encode() + b"=" + named + b"/" not in _environ(p)]


def _environ(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def switch_processes() -> list[str]:
    """softswitch / simple_switch_grpc processes logging under the fabric run directory."""
    found = []
    for pid in _pids():
        argv = _argv(pid)
        if any(Path(a).name in ("softswitch", "simple_switch_grpc") for a in argv[:3]):
            logs = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--log-file"]
            if any(Path(log).is_relative_to(RUN_DIR) for log in logs):
                found.append(f"{pid} {' '.join(argv[:4])}")
    return found


def node_shells() -> list[str]:
    return [f"{pid} {a}" for pid in _pids() for a in _argv(pid)
            if a.startswith("mininet:") and FABRIC_NODE.fullmatch(a[len("mininet:"):])]


def fabric_interfaces() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    names = [line.split(":", 2)[1].strip().split("@")[0] for line in out.splitlines()]
    return [n for n in names if FABRIC_INTF.fullmatch(n)]


def fabric_namespaces() -> list[str]:
    """Network namespaces other than ours holding an interface with a fabric host's name."""
    own = os.stat("/proc/self/ns/net").st_ino
    seen: dict[int, str] = {}
    for pid in _pids():
        try:
            ino = os.stat(f"/proc/{pid}/ns/net").st_ino
            if ino == own or ino in seen:
                continue
            devs = Path(f"/proc/{pid}/net/dev").read_text()
        except OSError:
            continue
        seen[ino] = " ".join(n for n in re.findall(r"^\s*([^:\s]+):", devs, re.M) if FABRIC_INTF.fullmatch(n))
    return [f"netns {ino}: {names}" for ino, names in seen.items() if names]


def listening_fabric_ports(netns: str | None = None) -> list[str]:
    """Addresses listened on in the fabric's port range, in ``netns`` (default: this namespace)."""
    cmd = ["ss", "-ltnH", "sport >= :50000 and sport <= :50999"]
    out = subprocess.run(["ip", "netns", "exec", netns, *cmd] if netns else cmd,
                         capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines() if line.strip()]


def what_is_left() -> dict[str, list[str]]:
    left = {"switch processes": switch_processes(), "node shells": node_shells(),
            "interfaces": fabric_interfaces(), "namespaces": fabric_namespaces(),
            "listening ports 50000-50999": listening_fabric_ports()}
    return {k: v for k, v in left.items() if v}


@pytest.fixture
def clean_machine():
    """Start from a machine without a fabric (one may be running: a fabric's names and ports
    are the machine's, so this test cannot run beside it, and must not destroy it); leave a
    clean machine, even when the test failed."""
    before = what_is_left()
    assert not before, f"a fabric is running or was left on this machine (`aifabric clean`): {before}"
    yield
    if what_is_left():
        cleanup(nodes=TEST_NODES)


# --- driving the aifabric command ----------------------------------------------------------

@dataclass
class Run:
    """An ``aifabric`` process whose stdout and stderr lines are collected as they come."""

    proc: subprocess.Popen
    lines: list[str] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    def start(cls, *args: str) -> "Run":
        proc = subprocess.Popen([AIFABRIC, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        run = cls(proc)
        for stream in (proc.stdout, proc.stderr):
            threading.Thread(target=run._read, args=(stream,), daemon=True).start()
        return run

    def _read(self, stream) -> None:
        buf = b""
        while chunk := stream.read1(4096):
            buf += chunk
            *done, buf = buf.split(b"\n")
            # Mininet's prompt comes without a newline
            if buf.endswith(b"mininet> "):
                done, buf = [*done, buf], b""
            with self.cond:
                self.lines += [d.decode(errors="replace") for d in done]
                self.cond.notify_all()
        with self.cond:
            self.lines.append(buf.decode(errors="replace"))
            self.cond.notify_all()

    def wait_for(self, text: str, timeout: float = 180.0, after: int = 0) -> int:
        """Index of the first line (from ``after`` on) containing ``text``."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i in range(after, len(self.lines)):
                    if text in self.lines[i]:
                        return i
                assert self.proc.poll() is None, f"exited ({self.proc.returncode}) before {text!r}:\n{self.output()}"
                assert time.monotonic() < deadline, f"no {text!r} within {timeout:g} s:\n{self.output()}"
                self.cond.wait(0.2)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def finish(self, timeout: float = 90.0) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"aifabric still running {timeout:g} s after the signal:\n{self.output()}")

    def output(self) -> str:
        time.sleep(0.1)       # the readers' last lines
        with self.cond:
            return "\n".join(self.lines)[-4000:]


def assert_clean_exit(run: Run, status: int) -> str:
    """The process exited with ``status``, said everything was torn down, and it was."""
    code = run.finish()
    out = run.output()
    assert code == status, out
    left = what_is_left()
    assert not left, f"left behind: {left}\n{out}"
    assert TORN_DOWN in out, out
    return out


DEMO_K2 = ("demo", "--k", "2", "--target", "softswitch")


# --- the command, signalled at many points ---------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("point, signals", [
    ("starting 5 switch targets", [signal.SIGTERM]),            # Mininet making hosts and links
    ("links made; starting the switch targets", [signal.SIGINT]),
    ("pushing the pipeline", [signal.SIGTERM]),
    ("(iperf3", [signal.SIGINT, signal.SIGINT]),                 # traffic, then again in teardown
    ("tearing down", [signal.SIGINT, signal.SIGTERM]),           # the demo's own teardown, twice
], ids=["mininet-build", "switch-start", "pipeline-push", "traffic-twice", "teardown-twice"])
def test_a_signal_at_any_point_leaves_nothing(clean_machine, point, signals):
    run = Run.start(*DEMO_K2)
    at = run.wait_for(point)
    run.signal(signals[0])
    if len(signals) > 1:
        # a line after the point: signalled at "tearing down" itself, the notice that the first
        # signal was taken (from the point on, that line itself matched and both signals went
        # out at once, to be taken in either order)
        run.wait_for("tearing down", timeout=60, after=at + 1)
        run.signal(signals[1])
    out = assert_clean_exit(run, 128 + signals[0])
    if len(signals) > 1:
        assert out.count(WAIT_NOTICE) == 1, out


@pytest.mark.slow
def test_k4_ctrl_c_twice_during_traffic_leaves_nothing(clean_machine):
    run = Run.start("demo", "--k", "4", "--target", "softswitch")
    at = run.wait_for("(iperf3", timeout=300)
    run.signal(signal.SIGINT)
    run.wait_for("tearing down", timeout=60, after=at)
    run.signal(signal.SIGINT)
    out = assert_clean_exit(run, 130)
    assert out.count(WAIT_NOTICE) == 1, out


@pytest.mark.slow
def test_up_keeps_ctrl_c_for_mininet_and_tears_down_on_sigterm(clean_machine):
    run = Run.start("up", "--topo", "leafspine", "--leaves", "2", "--spines", "1", "--hosts-per-leaf", "1",
                    "--target", "softswitch")
    prompt = run.wait_for("mininet> ")
    run.signal(signal.SIGINT)          # in Mininet's CLI, Ctrl-C stops the running command only
    run.wait_for("mininet> ", timeout=30, after=prompt + 1)
    assert run.proc.poll() is None and len(switch_processes()) == 3, run.output()
    run.signal(signal.SIGTERM)
    assert_clean_exit(run, 128 + signal.SIGTERM)


@pytest.mark.slow
def test_the_command_names_what_is_left_instead_of_claiming_a_clean_machine(clean_machine):
    with socket.socket() as squatter:    # a listener in the fabric's port range that is not ours
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", 50999))
        squatter.listen()
        run = Run.start(*DEMO_K2)
        run.wait_for("pushing the pipeline")
        run.signal(signal.SIGINT)
        assert run.finish() == 130
        out = run.output()
    assert TORN_DOWN not in out, out
    assert "left" in out and "50999" in out, out
    assert not switch_processes() and not fabric_interfaces() and not fabric_namespaces()


# --- labs side by side ----------------------------------------------------------------------

@pytest.mark.slow
def test_a_named_lab_runs_beside_the_machines_own_and_is_cleaned_alone(clean_machine):
    """Two k=2 fat-trees at once with the same switch names and P4Runtime ports: one in this
    process, in the machine's namespace; one named (`aifabric --lab side up`), in namespace
    aifabric-side. Both reach all their pairs. The named one, its commands killed as in a crash,
    is cleaned by `aifabric --lab side clean` alone: the other lab keeps working."""
    from aifabric.lab.lab import Lab
    from aifabric.lab.named_labs import NamedLab
    from emulation.procs import snapshot

    side = NamedLab("side")
    web_port = free_tcp_port()
    run = Run.start("--lab", side.name, "up", "--k", "2", "--target", "softswitch", "--web", str(web_port))
    try:
        prompt = run.wait_for("mininet> ")
        with Lab(fat_tree(2), target="softswitch") as lab:
            ports = {sw.grpc_port for sw in fat_tree(2).switches}
            def listening(netns: str | None = None) -> set[int]:
                return {int(address.rsplit(":", 1)[1]) for address in listening_fabric_ports(netns)}

            assert listening() == ports and listening(side.netns) == ports, run.output()
            assert lab.net.pingAll() == 0
            run.proc.stdin.write(b"pingall\n")
            run.proc.stdin.flush()
            run.wait_for("Results: 0% dropped", timeout=60, after=prompt + 1)
            # its live page, served inside its namespace, reached from this one through the relay
            with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/api/topology", timeout=30) as r:
                names = {n["id"] for n in json.load(r)["nodes"]}
            assert {sw.name for sw in fat_tree(2).switches} <= names, names

            marked = str(side.run_dir.resolve())
            commands = [p.pid for p in snapshot() if p.lab == marked and "aifabric.cli" in p.argv]
            assert commands, run.output()        # the command run again inside the namespace
            for pid in [run.proc.pid, *commands]:
                os.kill(pid, signal.SIGKILL)
            run.proc.wait()
            assert any(p.lab == marked for p in snapshot())        # its switches outlive it
            done = subprocess.run([AIFABRIC, "--lab", side.name, "clean"], capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 0 and "Nothing is left." in done.stdout, done.stdout + done.stderr
            assert not [p.describe() for p in snapshot() if p.lab == marked]
            assert side.netns_inode() is None
            assert lab.net.pingAll() == 0 and all(sw.connected() for sw in lab.net.switches)
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
        subprocess.run([AIFABRIC, "--lab", side.name, "clean"], capture_output=True, timeout=120)
    assert not what_is_left()


# --- the pieces --------------------------------------------------------------------------------

def test_cleanup_kills_node_shells_and_everything_in_their_namespaces(tmp_path):
    """A host's shell ignores SIGTERM (interactive bash); a process started in its namespace in
    a session of its own outlives the shell and keeps the namespace: both must go."""
    shell = subprocess.Popen(["unshare", "-n", "bash", "--norc", "--noediting", "-is", "mininet:p98e9h0"],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    bystander = subprocess.Popen(["unshare", "-n", "sleep", "600"], start_new_session=True)
    stray = None
    try:
        deadline = time.monotonic() + 10
        while os.stat(f"/proc/{shell.pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino:
            assert time.monotonic() < deadline, "unshare did not make a namespace"
            time.sleep(0.02)
        stray = subprocess.Popen(["nsenter", "-t", str(shell.pid), "-n", "sleep", "600"], start_new_session=True)
        subprocess.run(["ip", "link", "add", "p98e9-eth1", "type", "veth", "peer", "name", "p98e9h0-eth0",
                        "netns", str(shell.pid)], check=True)
        time.sleep(0.2)
        nodes = ["p98e9", "p98e9h0"]
        before = leftovers(tmp_path, nodes=nodes)
        assert len(before.processes) == 2 and len(before.namespaces) == 1 and before.interfaces == ["p98e9-eth1"], before

        report = cleanup(tmp_path, nodes=nodes)

        assert shell.wait(timeout=10) == -signal.SIGKILL
        assert stray.wait(timeout=10) == -signal.SIGKILL
        assert bystander.poll() is None, "a process in a namespace that is not a fabric host's was killed"
        assert not report.remaining and not report.errors, report
        assert "p98e9-eth1" not in fabric_interfaces()
    finally:
        for p in (shell, bystander, stray):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run(["ip", "link", "del", "p98e9-eth1"], capture_output=True)


def test_cleanup_leaves_another_labs_shells_and_namespaces_alone(tmp_path):
    """Labs side by side share node names: a shell named like ours, in a namespace holding an
    interface named like ours, is another lab's when it carries that lab's marker, and stays;
    the same shell unmarked is a leftover, and goes."""
    from emulation.procs import LAB_MARKER

    def shell(env: dict[str, str]) -> subprocess.Popen:
        return subprocess.Popen(["unshare", "-n", "bash", "--norc", "--noediting", "-is", "mininet:p98e9h0"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, env=env)

    other = {k: v for k, v in os.environ.items() if k != LAB_MARKER}
    theirs = shell({**other, LAB_MARKER: str(tmp_path / "another-lab")})
    leftover = shell(other)
    try:
        time.sleep(0.3)
        subprocess.run(["ip", "link", "add", "p98e9-eth1", "type", "veth", "peer", "name", "p98e9h0-eth0",
                        "netns", str(theirs.pid)], check=True)
        report = cleanup(tmp_path / "this-lab", nodes=["p98e9h0"])
        assert leftover.wait(timeout=10) == -signal.SIGKILL
        assert theirs.poll() is None, f"another lab's shell was killed: {report}"
        assert not report.remaining and not report.errors, report
    finally:
        for p in (theirs, leftover):
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run(["ip", "link", "del", "p98e9-eth1"], capture_output=True)


def test_leftovers_finds_marked_processes_and_listening_ports(tmp_path):
    from emulation.procs import marked_env

    marked = subprocess.Popen(["sleep", "600"], env=marked_env(tmp_path, "p98e9"))
    try:
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 50998))
            listener.listen()
            time.sleep(0.1)
            left = leftovers(tmp_path, nodes=["p98e9"], ports=[50998])
            assert left.ports == [50998] and [p.split()[0] for p in left.processes] == [str(marked.pid)], left
            assert "50998" in left.describe() and str(marked.pid) in left.describe()
        assert not leftovers(tmp_path, nodes=["p98e8"], ports=[50998]), "another node's process was counted"
        report = cleanup(tmp_path, nodes=["p98e9"])
        assert marked.wait(timeout=10) == -signal.SIGKILL and not report.remaining
    finally:
        if marked.poll() is None:
            marked.kill()
            marked.wait()


def test_cleanup_of_some_nodes_spares_the_targets_of_the_others(tmp_path):
    """A lab's own sweep must not stop another lab's switches (the one whose ports it found busy)."""
    from emulation.procs import marked_env

    fake = tmp_path / "bin" / "softswitch"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    fake.chmod(0o755)

    def target(node: str) -> subprocess.Popen:
        return subprocess.Popen([str(fake), "--device-id", "9", "--log-file", str(tmp_path / f"{node}.log")],
                                env=marked_env(tmp_path, node))

    mine, theirs = target("p97e9"), target("p96e9")
    try:
        time.sleep(0.3)
        report = cleanup(tmp_path, nodes=["p97e9"])
        assert mine.wait(timeout=10) == -signal.SIGTERM
        assert theirs.poll() is None, "the sweep of one lab's nodes stopped another lab's switch"
        assert not report.remaining, report
    finally:
        for p in (mine, theirs):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_signals_during_a_shielded_teardown_are_held_and_announced_once():
    notices: list[str] = []
    before = signal.getsignal(signal.SIGINT)
    with shielded(notices.append) as held:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)           # handlers run in this thread, between bytecodes
    assert held == [signal.SIGINT, signal.SIGTERM]
    assert len(notices) == 1 and WAIT_NOTICE in notices[0]
    assert signal.getsignal(signal.SIGINT) is before, "the shield did not give the handler back"


def test_the_first_signal_raises_and_the_later_ones_wait():
    notices: list[str] = []
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    gate = SignalGate(notices.append)
    try:
        with pytest.raises(Terminated) as raised:
            with gate.installed():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)
        assert raised.value.signum == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGINT)    # the gate stays: the process is on its way out
        time.sleep(0.1)
        assert gate.received == [signal.SIGTERM, signal.SIGINT] and len(notices) == 1
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


def test_a_signal_taken_by_another_thread_still_interrupts_the_main_thread():
    """The main thread blocked in a read is woken although the kernel hands SIGTERM to another
    thread (here the main thread blocks it, as happens by chance with gRPC's threads)."""
    read_end, write_end = os.pipe()
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    taker = threading.Thread(target=time.sleep, args=(5,), daemon=True)
    taker.start()                        # started before the block: it can take SIGTERM
    late: list[bool] = []

    def give_up() -> None:               # without the waking, the read would never end
        late.append(True)
        os.write(write_end, b"x")

    unblock = threading.Timer(10, give_up)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        unblock.start()
        with pytest.raises(Terminated):
            with SignalGate(lambda message: None).installed():
                threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
                os.read(read_end, 1)
        assert not late, "SIGTERM was handled only when the blocking read ended by itself"
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        unblock.cancel()
        for s, h in saved.items():
            signal.signal(s, h)
        os.close(read_end)
        os.close(write_end)
