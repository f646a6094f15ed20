"""The collectives' reliable transport natively: hostpath.c/.h (the engine) and binding.py (its
ctypes binding, NativeTransport); chosen by hostagent.collectives.host_path."""

from hostagent.collectives.native.binding import NativeTransport

__all__ = ["NativeTransport"]
