"""Errors of the controller, each naming the switch (name and device id) it concerns.

A rejected P4Runtime ``Write`` comes back as a gRPC error whose ``grpc-status-details-bin``
trailing metadata holds a ``google.rpc.Status`` with one ``p4.v1.Error`` per update of the batch
(OK for the updates that were applied). `parse_write_failures` turns that into `UpdateFailure`s;
`WriteError` prints them with the entity in readable form, e.g.::

    write to p0e0 (device 1) at 127.0.0.1:50001 failed: 1 of 12 updates rejected
      update 3: INSERT table FabricIngress.forwarding.routing_v4 [ipv4_dst=10.1.0.0/24]
                -> FabricIngress.forwarding.set_next_id(next_id=3): ALREADY_EXISTS: Match entry exists
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2


def code_name(code: int) -> str:
    """``google.rpc.Code`` number -> its name (``ALREADY_EXISTS``)."""
    try:
        return code_pb2.Code.Name(code)
    except ValueError:
        return f"CODE_{code}"


def switch_label(name: str, device_id: int, address: str | None = None) -> str:
    label = f"{name} (device {device_id})"
    return f"{label} at {address}" if address else label


class SwitchError(Exception):
    """Something went wrong with one switch; ``switch``/``device_id`` say which."""

    def __init__(self, switch: str, device_id: int, message: str, address: str | None = None) -> None:
        self.switch = switch
        self.device_id = device_id
        self.address = address
        self.detail = message
        super().__init__(f"{switch_label(switch, device_id, address)}: {message}")


class SwitchConnectionError(SwitchError):
    """No P4Runtime server, the stream broke, or an RPC timed out / failed at the gRPC level."""


class NotPrimaryError(SwitchError):
    """Another client with a higher election id is primary for this device."""


class PipelineError(SwitchError):
    """SetForwardingPipelineConfig / GetForwardingPipelineConfig failed."""


@dataclass(frozen=True)
class UpdateFailure:
    """One rejected update of a Write batch."""

    index: int  # position in the caller's list of updates
    update_type: str  # INSERT / MODIFY / DELETE
    entity: str  # readable description of the entity
    code: str  # canonical code name, e.g. ALREADY_EXISTS
    message: str  # the target's message

    def __str__(self) -> str:
        return f"update {self.index}: {self.update_type} {self.entity}: {self.code}: {self.message}"


class WriteError(SwitchError):
    """A Write was rejected (some or all of its updates)."""

    def __init__(
        self,
        switch: str,
        device_id: int,
        total: int,
        failures: Sequence[UpdateFailure],
        rpc_message: str = "",
        address: str | None = None,
    ) -> None:
        self.total = total
        self.failures = list(failures)
        if failures:
            lines = [f"write failed: {len(failures)} of {total} updates rejected"]
            lines += [f"  {f}" for f in failures[:20]]
            if len(failures) > 20:
                lines.append(f"  ... and {len(failures) - 20} more")
        else:
            lines = [f"write of {total} updates failed: {rpc_message}"]
        super().__init__(switch, device_id, "\n".join(lines), address)


class ReadError(SwitchError):
    """A Read failed; ``code`` is the gRPC status name (e.g. ``NOT_FOUND``)."""

    def __init__(self, switch: str, device_id: int, message: str, address: str | None = None, code: str = "") -> None:
        self.code = code
        super().__init__(switch, device_id, message, address)


def rpc_error_text(err: grpc.RpcError) -> str:
    """``CODE: details`` of a gRPC error."""
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    return f"{code.name if code is not None else 'UNKNOWN'}: {details}"


def status_details(err: grpc.RpcError) -> status_pb2.Status | None:
    """The google.rpc.Status carried in the error's trailing metadata, if any."""
    metadata = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in metadata or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status()
            status.ParseFromString(value)
            return status
    return None


def parse_write_failures(
    err: grpc.RpcError,
    updates: Sequence[p4runtime_pb2.Update],
    describe: Callable[[p4runtime_pb2.Entity], str],
    offset: int = 0,
) -> list[UpdateFailure]:
    """The per-update errors of a failed Write of ``updates`` (indices shifted by ``offset``).

    When the target sent no per-update details, every update is reported with the RPC's status.
    """
    status = status_details(err)
    failures: list[UpdateFailure] = []
    if status is not None and status.details:
        for i, detail in enumerate(status.details):
            error = p4runtime_pb2.Error()
            if not detail.Unpack(error):
                continue
            if error.canonical_code == code_pb2.OK:
                continue
            update = updates[i] if i < len(updates) else None
            failures.append(
                UpdateFailure(
                    index=offset + i,
                    update_type=p4runtime_pb2.Update.Type.Name(update.type) if update is not None else "?",
                    entity=describe(update.entity) if update is not None else "?",
                    code=code_name(error.canonical_code),
                    message=error.message,
                )
            )
        return failures
    code = err.code().name if hasattr(err, "code") and err.code() is not None else "UNKNOWN"
    message = err.details() if hasattr(err, "details") else str(err)
    if len(updates) == 1:
        u = updates[0]
        return [UpdateFailure(offset, p4runtime_pb2.Update.Type.Name(u.type), describe(u.entity), code, message or "")]
    return []
