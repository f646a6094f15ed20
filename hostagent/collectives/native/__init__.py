"""The collectives' reliable transport natively: the engine (hostpath.h its API; hostpath.c,
messages.c, calls.c and engine.c its parts; rocev2.c its RoCEv2 framing) and binding.py (its ctypes
binding, NativeTransport); chosen by hostagent.collectives.host_path."""

from hostagent.collectives.native.binding import NativeTransport

__all__ = ["NativeTransport"]
