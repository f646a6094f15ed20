"""The local control channel of a running fabric: `aifabric fail/restore ...` in another terminal
reaches the `aifabric.lab.failures.Failures` of the `aifabric up` that serves it.

A Unix stream socket, ``/run/aifabric/control.sock`` (``AIFABRIC_CONTROL_SOCKET`` elsewhere), in
a directory only root may enter (0700, owned by root; refused otherwise), the socket itself 0600,
and every peer's credentials checked (SO_PEERCRED uid 0): killing switches is root's business,
and nothing here may hand a local user what root can do. One request per connection, one line of
JSON of at most MAX_REQUEST bytes::

    {"op": "fail_link", "args": ["p0a0", "c0"]}

``op`` one of `aifabric.lab.failures.ACTIONS`, ``args`` node names (letters, digits, _; two for
links, one for switches) checked before anything is done; no other field is accepted. The answer
is one line of JSON: ``{"ok": true, "event": {...}}`` or ``{"ok": false, "error": "..."}``.
"""
from __future__ import annotations

import json
import os
import socket
import stat
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

from aifabric.lab.failures import ACTIONS, NAME, FailureError, Failures

DEFAULT_PATH = Path("/run/aifabric/control.sock")
MAX_REQUEST = 512
CLIENT_TIMEOUT_S = 5.0          # a peer that says nothing for this long is dropped
ANSWER_TIMEOUT_S = 120.0        # restoring a switch on a busy machine takes a while
ARITY = {"fail_link": 2, "restore_link": 2, "fail_switch": 1, "restore_switch": 1}


class RequestError(ValueError):
    """A request refused before anything was done; the message says what was wrong."""


class NoFabric(RuntimeError):
    """No fabric serves the control socket."""


@dataclass(frozen=True)
class Request:
    op: str
    args: tuple[str, ...]


def socket_path() -> Path:
    return Path(os.environ.get("AIFABRIC_CONTROL_SOCKET", DEFAULT_PATH))


def parse_request(raw: bytes) -> Request:
    """A request line checked strictly (see the module docstring); RequestError otherwise."""
    if len(raw) > MAX_REQUEST:
        raise RequestError(f"request longer than {MAX_REQUEST} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise RequestError("request is not one line of JSON") from None
    if not isinstance(data, dict) or set(data) != {"op", "args"}:
        raise RequestError('request must be an object with exactly "op" and "args"')
    op, args = data["op"], data["args"]
    if op not in ACTIONS:
        raise RequestError(f"unknown op {op!r}: one of {', '.join(ACTIONS)}")
    if not isinstance(args, list) or len(args) != ARITY[op]:
        raise RequestError(f"{op} takes {ARITY[op]} node name(s)")
    for a in args:
        if not isinstance(a, str) or not NAME.match(a):
            raise RequestError(f"bad node name {a!r}: letters, digits and _ only, at most 32")
    return Request(op, tuple(args))


def perform(failures: Failures, request: Request) -> dict:
    """Run a checked request; the answer as a dict."""
    try:
        event = getattr(failures, request.op)(*request.args)
    except FailureError as err:
        return {"ok": False, "error": str(err)}
    return {"ok": True, "event": event.to_dict()}


class ControlServer:
    """Serves ``failures`` on ``path`` from a background thread (`start`/`stop`)."""

    def __init__(self, failures: Failures, path: Path | None = None) -> None:
        self.failures = failures
        self.path = Path(path) if path is not None else socket_path()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def start(self) -> "ControlServer":
        _private_dir(self.path.parent)
        if self.path.exists() or self.path.is_symlink():
            if _answers(self.path):
                raise RuntimeError(f"control socket {self.path} is served by another fabric")
            self.path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)           # the socket is 0600 from its first moment
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old)
        sock.listen(4)
        sock.settimeout(0.5)
        self._sock = sock
        self._thread = threading.Thread(target=self._serve, name="aifabric-control", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self) -> "ControlServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with conn:      # one at a time: injections are serialised anyway
                try:
                    answer = self._handle(conn)
                except OSError:
                    continue
                try:
                    conn.sendall((json.dumps(answer) + "\n").encode())
                except OSError:
                    pass

    def _handle(self, conn: socket.socket) -> dict:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        if uid != 0:
            return {"ok": False, "error": f"uid {uid} refused: only root may inject failures"}
        conn.settimeout(CLIENT_TIMEOUT_S)
        raw = _read_line(conn)
        try:
            request = parse_request(raw)
        except RequestError as err:
            return {"ok": False, "error": str(err)}
        return perform(self.failures, request)


def _read_line(conn: socket.socket) -> bytes:
    buf = b""
    while b"\n" not in buf and len(buf) <= MAX_REQUEST:
        chunk = conn.recv(MAX_REQUEST + 1 - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\n", 1)[0] if b"\n" in buf else buf


def _private_dir(path: Path) -> None:
    """``path`` made (0700) or checked: a directory owned by root that no one else may enter."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0:
        raise RuntimeError(f"{path} must be a directory owned by root (it is not): refusing to serve there")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
            return True
        except OSError:
            return False


def request(op: str, args: list[str], path: Path | None = None) -> dict:
    """Send one request to the fabric serving ``path``; NoFabric when none does."""
    path = Path(path) if path is not None else socket_path()
    line = json.dumps({"op": op, "args": list(args)}).encode() + b"\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(ANSWER_TIMEOUT_S)
        try:
            s.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            raise NoFabric(f"no fabric running (nothing serves {path}; start one with `aifabric up`)") from None
        except PermissionError:
            raise PermissionError(f"{path}: permission denied (failure injection needs root)") from None
        s.sendall(line)
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    try:
        return json.loads(answer)
    except ValueError:
        raise NoFabric(f"the fabric serving {path} gave no answer") from None


def main(args) -> int:  # type: ignore[no-untyped-def]
    """``aifabric fail|restore link A B|switch S``: one request, the answer printed."""
    import sys

    op = f"{args.command}_{args.element}"
    names = [args.a, args.b] if args.element == "link" else [args.switch]
    try:
        parse_request(json.dumps({"op": op, "args": names}).encode())
        answer = request(op, names)
    except (RequestError, NoFabric, PermissionError) as err:
        print(f"aifabric: error: {err}", file=sys.stderr)
        return 2
    if not answer.get("ok"):
        print(f"aifabric: error: {answer.get('error')}", file=sys.stderr)
        return 1
    ev = answer["event"]
    print(f"{ev['action']} {ev['target']}: done in {1000 * (ev['end'] - ev['start']):.1f} ms "
          f"(monotonic {ev['start']:.6f}, wall {ev['wall']:.6f}) {json.dumps(ev['detail'])}")
    return 0
