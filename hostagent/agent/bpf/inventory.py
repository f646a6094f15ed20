"""What BPF programs and maps the kernel holds, through the bpf(2) syscall (no bpftool needed):
their ids and names, and the id behind a file descriptor. A host agent reports the ids of its
objects when it starts; after it exits, none of them may still be loaded."""
from __future__ import annotations

import ctypes
import errno
import os
from dataclasses import dataclass

_SYS_BPF = 321                      # x86_64
BPF_PROG_GET_NEXT_ID, BPF_MAP_GET_NEXT_ID = 11, 12
BPF_PROG_GET_FD_BY_ID, BPF_MAP_GET_FD_BY_ID = 13, 14
BPF_OBJ_GET_INFO_BY_FD = 15
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


def _bpf(cmd: int, attr: _Attr) -> int:
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
