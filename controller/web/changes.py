"""Changes asked of the fabric through the page: the token, the requests, who carries them out.

Every change is a POST to ``/api/change/<action>`` with a JSON object body and the header
``Authorization: Bearer <token>``, the token the server printed at start (`new_token`). The
token is checked on every request, in constant time; the body is checked field by field. A bad
request gets a 4xx whose JSON body names what was wrong (`ChangeError`):

* 401: no token; 403: a wrong token; 404: no such action, node or link;
* 400: a body that is not a JSON object, a field missing, unknown or of the wrong type or value;
* 409: a change this server cannot make (the controller service has no hand on the fabric's links).

What a change does is a `Changes` object's: `ControllerChanges` sets load-balancing modes through
the controller (an `LbModes` state source, registered on first use) and refuses link changes;
``aifabric up`` gives its own that also fails and restores links (`aifabric.lab.failures`).
"""
from __future__ import annotations

import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Protocol

from controller.load_balance import MODES, LbModes

ACTIONS = ("fail-link", "restore-link", "lb-mode")
FIELDS = {"fail-link": {"a": str, "b": str}, "restore-link": {"a": str, "b": str},
          "lb-mode": {"mode": str, "switches": list, "gap_us": int}}
REQUIRED = {"fail-link": ("a", "b"), "restore-link": ("a", "b"), "lb-mode": ("mode",)}


class ChangeError(Exception):
    """A refused change: ``status`` (4xx) and a message naming what was wrong."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def new_token() -> str:
    return secrets.token_urlsafe(24)


def check_token(authorization: str | None, token: str) -> None:
    """The request's ``Authorization`` header against the server's token."""
    if not authorization or authorization.strip().lower() == "bearer":
        raise ChangeError(401, "no token: changes need the header 'Authorization: Bearer <token>' with the "
                               "token printed when the server started")
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise ChangeError(401, f"Authorization header: expected 'Bearer <token>', got a {scheme!r} credential")
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise ChangeError(403, "wrong token: not the one printed when the server started")


@dataclass(frozen=True)
class Request:
    action: str
    fields: dict


def parse_request(action: str, body: bytes) -> Request:
    """A change request's action and body, checked (ChangeError names the bad part)."""
    if action not in ACTIONS:
        raise ChangeError(404, f"no change named {action!r}; the changes are {', '.join(ACTIONS)}")
    try:
        data = json.loads(body.decode("utf-8") if body else "")
    except (UnicodeDecodeError, ValueError) as err:
        raise ChangeError(400, f"body: not JSON ({err})") from None
    if not isinstance(data, dict):
        raise ChangeError(400, f"body: expected a JSON object, got {type(data).__name__}")
    expected = FIELDS[action]
    unknown = sorted(set(data) - set(expected))
    if unknown:
        raise ChangeError(400, f"unknown field(s) {', '.join(unknown)} for {action}; expected {', '.join(expected)}")
    for name in REQUIRED[action]:
        if name not in data:
            raise ChangeError(400, f"field {name!r} is missing ({action} needs {', '.join(REQUIRED[action])})")
    for name, value in data.items():
        kind = expected[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ChangeError(400, f"field {name!r}: expected {kind.__name__}, got {type(value).__name__}")
    if action == "lb-mode":
        if data["mode"] not in MODES:
            raise ChangeError(400, f"field 'mode': {data['mode']!r} is not one of {', '.join(MODES)}")
        if not all(isinstance(s, str) for s in data.get("switches", [])):
            raise ChangeError(400, "field 'switches': expected a list of switch names")
    return Request(action, data)


class Changes(Protocol):
    """What carries changes out; each returns a JSON-able record of what it did and raises
    ChangeError for a request it cannot honour."""

    def fail_link(self, a: str, b: str) -> dict: ...

    def restore_link(self, a: str, b: str) -> dict: ...

    def set_lb_mode(self, mode: str, switches: list[str] | None, gap_us: int | None) -> dict: ...

    def injected(self) -> dict[str, list]: ...


def apply(changes: Changes, request: Request, fabric) -> dict:
    """Carry ``request`` out with ``changes``, after checking its names against ``fabric``."""
    f = request.fields
    if request.action in ("fail-link", "restore-link"):
        check_link(fabric, f["a"], f["b"])
        do = changes.fail_link if request.action == "fail-link" else changes.restore_link
        return do(f["a"], f["b"])
    switches = f.get("switches")
    known = {sw.name for sw in fabric.switches}
    unknown = [s for s in switches or [] if s not in known]
    if unknown:
        raise ChangeError(404, f"no switch named {', '.join(map(repr, unknown))} in {fabric.describe()}")
    return changes.set_lb_mode(f["mode"], switches, f.get("gap_us"))


def check_link(fabric, a: str, b: str) -> None:
    nodes = {sw.name for sw in fabric.switches} | {h.name for h in fabric.hosts}
    for name in (a, b):
        if name not in nodes:
            raise ChangeError(404, f"no node named {name!r} in {fabric.describe()}")
    if not any({ln.a, ln.b} == {a, b} for ln in fabric.links):
        raise ChangeError(404, f"no link between {a} and {b} in {fabric.describe()}")


class ControllerChanges:
    """Load-balancing modes through the controller; link changes refused (no hand on links)."""

    def __init__(self, controller) -> None:
        self.controller = controller

    def lb_modes(self) -> LbModes:
        found = next((s for s in self.controller.state_sources if isinstance(s, LbModes)), None)
        return found or LbModes(self.controller)

    def set_lb_mode(self, mode: str, switches: list[str] | None, gap_us: int | None) -> dict:
        try:
            if gap_us is None:
                self.lb_modes().set(mode, switches)
            else:
                self.lb_modes().set(mode, switches, gap_us=gap_us)
        except ValueError as err:
            raise ChangeError(400, str(err)) from None
        return {"mode": mode, "switches": switches or "all", "gap_us": gap_us}

    def fail_link(self, a: str, b: str) -> dict:
        raise ChangeError(409, f"this server (the controller alone) cannot take link {a}-{b} down: the links "
                               "belong to the fabric's side (`aifabric fail link A B` there)")

    def restore_link(self, a: str, b: str) -> dict:
        raise ChangeError(409, f"this server (the controller alone) cannot bring link {a}-{b} up: the links "
                               "belong to the fabric's side (`aifabric restore link A B` there)")

    def injected(self) -> dict[str, list]:
        return {"links": [], "switches": []}
