"""Errors of the P4Runtime server, each carrying a canonical ``google.rpc.Code``.

Every check in the server raises `P4RTError`; the RPC handlers turn it into the gRPC status
(RPC-wide errors) or into one ``p4.v1.Error`` of the batch (per-update / per-entity errors).
"""
from __future__ import annotations

from google.rpc import code_pb2

OK = code_pb2.OK
CANCELLED = code_pb2.CANCELLED
ABORTED = code_pb2.ABORTED
UNKNOWN = code_pb2.UNKNOWN
INVALID_ARGUMENT = code_pb2.INVALID_ARGUMENT
DEADLINE_EXCEEDED = code_pb2.DEADLINE_EXCEEDED
NOT_FOUND = code_pb2.NOT_FOUND
ALREADY_EXISTS = code_pb2.ALREADY_EXISTS
PERMISSION_DENIED = code_pb2.PERMISSION_DENIED
RESOURCE_EXHAUSTED = code_pb2.RESOURCE_EXHAUSTED
FAILED_PRECONDITION = code_pb2.FAILED_PRECONDITION
OUT_OF_RANGE = code_pb2.OUT_OF_RANGE
UNIMPLEMENTED = code_pb2.UNIMPLEMENTED
INTERNAL = code_pb2.INTERNAL
UNAVAILABLE = code_pb2.UNAVAILABLE

# Error space reported in p4.v1.Error, the one PI uses for simple_switch.
ERROR_SPACE = "ALL-sswitch-p4org"

# Bounds on what an error says, whatever the client sent: a message holds at most
# MAX_MESSAGE_CHARS characters, a bytestring shown in it at most VALUE_PREVIEW_BYTES bytes.
MAX_MESSAGE_CHARS = 512
VALUE_PREVIEW_BYTES = 16


class P4RTError(Exception):
    """A request the server rejects; ``code`` is a google.rpc.Code number."""

    def __init__(self, code: int, message: str):
        message = clip(message, MAX_MESSAGE_CHARS)
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def code_name(self) -> str:
        return code_name(self.code)

    def __str__(self) -> str:
        return f"{self.code_name}: {self.message}"

    def detached(self) -> "P4RTError":
        """This error without its traceback and chained exceptions, to be kept (in a batch's
        results) without keeping the frames it was raised in and the request they held."""
        self.__traceback__ = self.__context__ = self.__cause__ = None
        return self


def code_name(code: int) -> str:
    try:
        return code_pb2.Code.Name(code)
    except ValueError:
        return f"CODE_{code}"


def show_bytes(data: bytes, limit: int = VALUE_PREVIEW_BYTES) -> str:
    """A bytestring for an error message: hex of at most ``limit`` bytes, then its length."""
    if len(data) <= limit:
        return "0x" + data.hex()
    return f"0x{data[:limit].hex()}... ({len(data)} bytes)"


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    tail = f"... ({len(text)} characters)"
    return text[:max(0, limit - len(tail))] + tail


def invalid(message: str) -> P4RTError:
    return P4RTError(INVALID_ARGUMENT, message)


def not_found(message: str) -> P4RTError:
    return P4RTError(NOT_FOUND, message)


def unimplemented(message: str) -> P4RTError:
    return P4RTError(UNIMPLEMENTED, message)


def out_of_range(message: str) -> P4RTError:
    return P4RTError(OUT_OF_RANGE, message)


def from_table_error(err: Exception) -> P4RTError:
    """A runtime ``TableError`` (code given by name) as a P4RTError."""
    name = getattr(err, "code", "UNKNOWN")
    code = code_pb2.Code.Value(name) if name in code_pb2.Code.keys() else UNKNOWN
    return P4RTError(code, str(err))
