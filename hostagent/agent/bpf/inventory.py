"""What BPF programs and maps the kernel holds, through the bpf(2) syscall (no bpftool needed):
their ids and names, and the id behind a file descriptor. A host agent reports the ids of its
objects when it starts; after it exits, none of them may still be loaded. Also a map opened by
its id and an element of it read, for a process that did not load it (a sender reading the
host's pause state: hostagent.lossless.pause)."""
from __future__ import annotations

import ctypes
import errno
import os
from dataclasses import dataclass

_SYS_BPF = 321                      # x86_64
BPF_PROG_GET_NEXT_ID, BPF_MAP_GET_NEXT_ID = 11, 12
BPF_PROG_GET_FD_BY_ID, BPF_MAP_GET_FD_BY_ID = 13, 14
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_MAP_LOOKUP_ELEM = 1
_INFO_BYTES = 256                   # more than bpf_prog_info / bpf_map_info hold
_PROG_NAME_AT, _MAP_NAME_AT = 64, 24
_ID_AT = 4                          # both infos: __u32 type, __u32 id, ...
_libc = ctypes.CDLL(None, use_errno=True)


class _Attr(ctypes.Structure):
    _fields_ = [("a", ctypes.c_uint32), ("b", ctypes.c_uint32), ("c", ctypes.c_uint64), ("pad", ctypes.c_uint8 * 104)]


@dataclass(frozen=True)
class BpfObject:
    kind: str           # prog | map
    id: int
    name: str


class _ElemAttr(ctypes.Structure):
    """bpf_attr for the map element commands: map_fd, key, value, flags."""
    _fields_ = [("map_fd", ctypes.c_uint32), ("pad0", ctypes.c_uint32), ("key", ctypes.c_uint64),
                ("value", ctypes.c_uint64), ("flags", ctypes.c_uint64), ("pad", ctypes.c_uint8 * 96)]


def _bpf(cmd: int, attr: ctypes.Structure) -> int:
    r = _libc.syscall(_SYS_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def _info(fd: int) -> bytes:
    buf = ctypes.create_string_buffer(_INFO_BYTES)
    attr = _Attr(fd, _INFO_BYTES, ctypes.addressof(buf))
    _bpf(BPF_OBJ_GET_INFO_BY_FD, attr)
    return buf.raw


def object_id(fd: int) -> int:
    """The kernel id of the program or map behind ``fd``."""
    return int.from_bytes(_info(fd)[_ID_AT:_ID_AT + 4], "little")


def map_fd(map_id: int) -> int:
    """A file descriptor of the map whose kernel id is ``map_id`` (OSError: none such)."""
    return _bpf(BPF_MAP_GET_FD_BY_ID, _Attr(map_id))


class MapReader:
    """Reads elements of one map by key, a syscall a lookup (a reader that did not load it)."""

    def __init__(self, fd: int, value_size: int):
        self.fd = fd
        self._value = ctypes.create_string_buffer(value_size)
        self._attr = _ElemAttr(map_fd=fd, value=ctypes.addressof(self._value))

    def get(self, key: bytes) -> bytes | None:
        """The value stored under ``key`` (None: no such element)."""
        k = ctypes.create_string_buffer(key, len(key))
        self._attr.key = ctypes.addressof(k)
        r = _libc.syscall(_SYS_BPF, BPF_MAP_LOOKUP_ELEM, ctypes.byref(self._attr), ctypes.sizeof(self._attr))
        if r < 0:
            e = ctypes.get_errno()
            if e == errno.ENOENT:
                return None
            raise OSError(e, os.strerror(e))
        return self._value.raw

    def close(self) -> None:
        os.close(self.fd)


def _name(info: bytes, at: int) -> str:
    return info[at:at + 16].split(b"\0", 1)[0].decode(errors="replace")


def loaded(kind: str) -> list[BpfObject]:
    """Every program (``prog``) or map (``map``) the kernel holds now."""
    next_cmd, fd_cmd, name_at = ((BPF_PROG_GET_NEXT_ID, BPF_PROG_GET_FD_BY_ID, _PROG_NAME_AT) if kind == "prog"
                                 else (BPF_MAP_GET_NEXT_ID, BPF_MAP_GET_FD_BY_ID, _MAP_NAME_AT))
    out, start = [], 0
    while True:
        attr = _Attr(start)
        try:
            _bpf(next_cmd, attr)
        except OSError as err:
            if err.errno == errno.ENOENT:
                return out
            raise
        start = attr.b
        try:
            fd = _bpf(fd_cmd, _Attr(start))
        except OSError:             # gone meanwhile
            continue
        try:
            out.append(BpfObject(kind, start, _name(_info(fd), name_at)))
        finally:
            os.close(fd)


def still_loaded(ids: dict[str, list[int]]) -> list[BpfObject]:
    """Which of ``ids`` ({"prog": [...], "map": [...]}) the kernel still holds."""
    return [o for kind, wanted in ids.items() for o in loaded(kind) if o.id in set(wanted)]
