"""Hash and checksum algorithms of BMv2, bit-exact.

This module re-implements the hash functors that BMv2 registers in
``src/bm_sim/calculations.cpp`` (plus the two that the ``simple_switch``
target registers itself), and the helpers around them:

* :func:`pack_bits` builds the input buffer of a calculation the way BMv2's
  ``BufBuilder`` does: fields and constants are bit-packed MSB first, one
  right after the other, and the buffer is padded with zero bits at the end up
  to a whole byte.  Fields of invalid headers are skipped by BMv2, so the
  caller simply leaves them out.  A whole header is ``(int.from_bytes(hdr,
  "big"), 8 * len(hdr))`` (BMv2 asserts it starts on a byte boundary), and the
  payload, when a calculation has one, is appended *after* the padding:
  ``pack_bits(fields) + payload``.
* :data:`ALGORITHMS` / :func:`get_algorithm` map BMv2 algorithm names (the
  ``"algo"`` strings of the JSON) to ``Callable[[bytes], int]``.
* :class:`CustomCrc` is a CRC with run-time parameters, like BMv2's
  ``crc{8,16,32,64}_custom`` that ``set_crc16_parameters`` /
  ``set_crc32_parameters`` reconfigure.
* :func:`hash_based_offset` and :func:`select_member_index` are how v1model's
  ``hash()`` and the action selector use a hash value.

Every algorithm returns an unsigned integer of its natural width (BMv2 widens
it to ``uint64_t``); the user of the value truncates it (a field assignment
keeps the low bits).  Results are plain integers: e.g. ``csum16`` returns the
checksum such that ``value.to_bytes(2, "big")`` is what goes on the wire.

Algorithms (BMv2 name: semantics):

``crc16``
    CRC-16/ARC: poly 0x8005, init 0, reflected in/out, no final xor.
    ``crc16(b"123456789") == 0xBB3D``.
``crc32``
    The standard CRC-32 (zlib's): poly 0x04C11DB7, init and final xor
    0xFFFFFFFF, reflected.  ``crc32(b"123456789") == 0xCBF43926``.
``crcCCITT``
    CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, not reflected, no final
    xor (``binascii.crc_hqx(data, 0xFFFF)``); ``0x29B1`` for "123456789".
``crc8_custom``, ``crc16_custom``, ``crc32_custom``, ``crc64_custom``
    :class:`CustomCrc` instances.  Default parameters (when the control plane
    sets none; p4c never emits any): crc8 = CRC-8 (0x07, 0, 0, not
    reflected), crc16 = CRC-16/ARC (same as ``crc16``), crc32 = CRC-32 (same
    as ``crc32``), crc64 = CRC-64/GO-ISO (0x1B, 0, 0, reflected).
``csum16``, ``cksum16``
    RFC 1071 Internet checksum (one's complement of the one's complement sum
    of the big-endian 16-bit words).  An odd-length buffer is padded with one
    zero byte *at the end*.  Empty or all-zero input gives 0xFFFF; a non-zero
    input whose sum is 0xFFFF gives 0x0000 (never 0xFFFF).
``identity``
    The first ``min(8, len)`` bytes as a big-endian integer, *not* padded:
    ``b"\\x01\\x02" -> 0x0102``; bytes after the 8th are ignored; empty -> 0.
``xor16``, ``xor32``
    XOR of the big-endian 16-bit (32-bit) words; a trailing partial word is
    padded with zero bytes at the end (left-aligned): ``xor16(b"\\x5a") ==
    0x5a00``.
``xxh64``
    XXH64 with seed 0 (64-bit result).
``toeplitz``
    32-bit Toeplitz (RSS) hash, see :class:`Toeplitz`; the default key is
    four zero bytes, so it returns 0 until a key is set.
``round_robin``, ``round_robin_consistent``
    Not hashes: a per-instance counter 0, 1, 2, ... (the consistent variant
    returns the same number again for an input it has already seen).
``hash_ex``, ``bmv2_hash``
    Registered by the simple_switch target: an FNV-1a-like hash (which XORs
    *sign-extended* bytes, a quirk of ``char``) and xxh64.

v1model's ``HashAlgorithm`` names map one to one to these names (p4c emits
``crc32``, ``crc32_custom``, ``crc16``, ``crc16_custom``, ``identity``,
``csum16``, ``xor16`` and ``random``).  BMv2 registers no ``random``
algorithm, so simple_switch refuses such a JSON ("Unknown hash algorithm:
random"); :func:`get_algorithm` raises ``ValueError`` for it likewise.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterable

from .crc import CRC_PRESETS, CrcConfig, CustomCrc, crc16, crc32, crc_ccitt, parse_custom_crc

__all__ = [
    "ALGORITHMS",
    "CRC_PRESETS",
    "CrcConfig",
    "CustomCrc",
    "RoundRobin",
    "RoundRobinConsistent",
    "Toeplitz",
    "crc16",
    "crc32",
    "crc_ccitt",
    "csum16",
    "get_algorithm",
    "hash_based_offset",
    "hash_ex",
    "identity",
    "pack_bits",
    "select_member_index",
    "xor16",
    "xor32",
    "xxh64",
]

HashFn = Callable[[bytes], int]

_M64 = (1 << 64) - 1


# ---------------------------------------------------------------------------
# Input buffer
# ---------------------------------------------------------------------------


def pack_bits(values_and_widths: Iterable[tuple[int, int]]) -> bytes:
    """Bit-pack ``(value, width)`` pairs MSB first, as BMv2's BufBuilder does.

    Each value occupies exactly ``width`` bits right after the previous one;
    only its low ``width`` bits are used (so a negative value of a signed
    ``int<W>`` field packs as its two's complement).  A width of 0
    contributes nothing.  The result is padded with zero bits at the end to a
    whole number of bytes, e.g. ``pack_bits([(1, 1)]) == b"\\x80"``.
    """
    acc = 0
    nbits = 0
    for value, width in values_and_widths:
        if width < 0:
            raise ValueError(f"negative bit width {width}")
        acc = (acc << width) | (value & ((1 << width) - 1))
        nbits += width
    pad = -nbits % 8
    return (acc << pad).to_bytes((nbits + pad) >> 3, "big")


# ---------------------------------------------------------------------------
# Checksums, identity, xor
# ---------------------------------------------------------------------------


def csum16(data: bytes) -> int:
    """BMv2 ``csum16`` / ``cksum16``: the RFC 1071 Internet checksum.

    Odd lengths are padded with a zero byte at the end.  The one's complement
    sum is computed as the buffer, read as one big-endian integer, modulo
    0xFFFF (2**16 == 1 mod 0xFFFF), with BMv2's end-around-carry convention
    that a non-zero input never sums to 0.
    """
    if len(data) & 1:
        data = bytes(data) + b"\x00"
    x = int.from_bytes(data, "big")
    if not x:
        return 0xFFFF
    s = x % 0xFFFF
    return 0xFFFF - s if s else 0


def identity(data: bytes) -> int:
    """BMv2 ``identity``: the first ``min(8, len(data))`` bytes, big-endian."""
    return int.from_bytes(data[:8], "big")


def _xor_words(data: bytes, size: int) -> int:
    n = len(data)
    rem = n % size
    if rem:
        data = bytes(data) + bytes(size - rem)
        n += size - rem
    x = int.from_bytes(data, "big")
    words = n // size
    # XOR the upper half of the words onto the lower half until one is left.
    while words > 1:
        low = (words + 1) >> 1
        shift = low * size * 8
        x = (x >> shift) ^ (x & ((1 << shift) - 1))
        words = low
    return x


def xor16(data: bytes) -> int:
    """BMv2 ``xor16``: XOR of the big-endian 16-bit words, tail zero-padded."""
    return _xor_words(data, 2)


def xor32(data: bytes) -> int:
    """BMv2 ``xor32``: XOR of the big-endian 32-bit words, tail zero-padded."""
    return _xor_words(data, 4)


# ---------------------------------------------------------------------------
# xxh64 and the simple_switch hashes
# ---------------------------------------------------------------------------

_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_STRIPE = struct.Struct("<4Q")


def _xxh64_py(data: bytes, seed: int = 0) -> int:
    """XXH64 (xxHash 64-bit), pure Python."""
    n = len(data)
    p = 0
    M = _M64
    if n >= 32:
        v1 = (seed + _P1 + _P2) & M
        v2 = (seed + _P2) & M
        v3 = seed & M
        v4 = (seed - _P1) & M
        limit = n - 32
        unpack = _STRIPE.unpack_from
        while p <= limit:
            a, b, c, d = unpack(data, p)
            p += 32
            v1 = (v1 + a * _P2) & M
            v1 = (((v1 << 31) | (v1 >> 33)) * _P1) & M
            v2 = (v2 + b * _P2) & M
            v2 = (((v2 << 31) | (v2 >> 33)) * _P1) & M
            v3 = (v3 + c * _P2) & M
            v3 = (((v3 << 31) | (v3 >> 33)) * _P1) & M
            v4 = (v4 + d * _P2) & M
            v4 = (((v4 << 31) | (v4 >> 33)) * _P1) & M
        h = (
            ((v1 << 1) | (v1 >> 63))
            + ((v2 << 7) | (v2 >> 57))
            + ((v3 << 12) | (v3 >> 52))
            + ((v4 << 18) | (v4 >> 46))
        ) & M
        for v in (v1, v2, v3, v4):
            v = (v * _P2) & M
            v = (((v << 31) | (v >> 33)) * _P1) & M
            h = ((h ^ v) * _P1 + _P4) & M
    else:
        h = (seed + _P5) & M
    h = (h + n) & M
    while p + 8 <= n:
        k = (_U64.unpack_from(data, p)[0] * _P2) & M
        k = (((k << 31) | (k >> 33)) * _P1) & M
        h ^= k
        h = (((h << 27) | (h >> 37)) * _P1 + _P4) & M
        p += 8
    if p + 4 <= n:
        h ^= (_U32.unpack_from(data, p)[0] * _P1) & M
        h = (((h << 23) | (h >> 41)) * _P2 + _P3) & M
        p += 4
    while p < n:
        h ^= (data[p] * _P5) & M
        h = (((h << 11) | (h >> 53)) * _P1) & M
        p += 1
    h ^= h >> 33
    h = (h * _P2) & M
    h ^= h >> 29
    h = (h * _P3) & M
    h ^= h >> 32
    return h


try:  # the C extension, if installed, computes the same function faster
    from xxhash import xxh64_intdigest as _xxh64_c  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the environment
    _xxh64_c = None


def xxh64(data: bytes) -> int:
    """BMv2 ``xxh64``: XXH64 with seed 0."""
    if _xxh64_c is not None:
        return _xxh64_c(data)
    return _xxh64_py(data)


def hash_ex(data: bytes) -> int:
    """simple_switch's ``hash_ex`` (an FNV-1a variant with a final mix).

    Like the C++ code, each byte is XORed in as a *signed* ``char``
    sign-extended to 32 bits: a byte >= 0x80 flips the upper 24 bits too.
    """
    h = 2166136261
    for b in data:
        h = ((h ^ (b | 0xFFFFFF00 if b & 0x80 else b)) * 16777619) & 0xFFFFFFFF
    h = (h + (h << 13)) & 0xFFFFFFFF
    h ^= h >> 7
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 17
    h = (h + (h << 5)) & 0xFFFFFFFF
    return h


# ---------------------------------------------------------------------------
# Toeplitz, round robin
# ---------------------------------------------------------------------------


class Toeplitz:
    """BMv2 ``toeplitz``: the 32-bit Toeplitz (RSS) hash with a settable key.

    The input is read as big-endian 32-bit words (the last one zero-padded);
    for every set bit at position ``i`` (0 = MSB of the first word) the 32
    key bits starting at bit ``i`` are XORed into the result.  The key is
    used cyclically, so inputs longer than the key wrap around it.  The
    default key is 4 zero bytes (the hash is then always 0).
    """

    __slots__ = ("_key", "_tables")

    def __init__(self, key: bytes = bytes(4)) -> None:
        self._key = b""
        self._tables: tuple[tuple[int, ...], ...] = ()
        self.update_key(key)

    @property
    def key(self) -> bytes:
        return self._key

    def update_key(self, key: bytes) -> None:
        """Set the key; like BMv2, it must be a non-empty multiple of 4 bytes."""
        key = bytes(key)
        if len(key) < 4 or len(key) % 4:
            raise ValueError(f"invalid Toeplitz key length {len(key)} (need a multiple of 4, >= 4)")
        nbits = 8 * len(key)
        k = int.from_bytes(key, "big")
        # Key stream long enough for a window starting at any bit of the key.
        stream = (k << 32) | (k >> (nbits - 32))
        tables = []
        for pos in range(len(key)):  # byte position modulo the key length
            bits = [
                (stream >> (nbits - (8 * pos + j))) & 0xFFFFFFFF for j in range(8)
            ]  # bits[j]: window for bit j (0 = MSB) of this byte
            table = [0] * 256
            for v in range(1, 256):
                low = v & -v
                table[v] = table[v ^ low] ^ bits[7 - low.bit_length() + 1]
            tables.append(tuple(table))
        # One assignment: a concurrent caller sees the old or the new tables.
        self._tables = tuple(tables)
        self._key = key

    def __call__(self, data: bytes) -> int:
        tables = self._tables
        period = len(tables)
        h = 0
        for i, b in enumerate(data):
            h ^= tables[i % period][b]
        return h


class RoundRobin:
    """BMv2 ``round_robin``: returns 0, 1, 2, ... whatever the input."""

    __slots__ = ("_lock", "_next")

    def __init__(self) -> None:
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self, data: bytes) -> int:
        with self._lock:
            value = self._next
            self._next = (value + 1) & _M64
        return value


class RoundRobinConsistent:
    """BMv2 ``round_robin_consistent``: a new number for each new input."""

    __slots__ = ("_lock", "_seen")

    def __init__(self) -> None:
        self._seen: dict[bytes, int] = {}
        self._lock = threading.Lock()

    def __call__(self, data: bytes) -> int:
        key = bytes(data)
        with self._lock:
            return self._seen.setdefault(key, len(self._seen))


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

_STATELESS: dict[str, HashFn] = {
    "xxh64": xxh64,
    "crc16": crc16,
    "crc32": crc32,
    "crcCCITT": crc_ccitt,
    "cksum16": csum16,
    "csum16": csum16,
    "identity": identity,
    "xor16": xor16,
    "xor32": xor32,
    # registered by the simple_switch target (simple_switch.cpp)
    "hash_ex": hash_ex,
    "bmv2_hash": xxh64,
}

_STATEFUL: dict[str, Callable[[], HashFn]] = {
    "toeplitz": Toeplitz,
    "round_robin": RoundRobin,
    "round_robin_consistent": RoundRobinConsistent,
    "crc8_custom": lambda: CustomCrc.default(8),
    "crc16_custom": lambda: CustomCrc.default(16),
    "crc32_custom": lambda: CustomCrc.default(32),
    "crc64_custom": lambda: CustomCrc.default(64),
}

#: Every BMv2 algorithm by name.  The entries of stateful algorithms (custom
#: CRCs, toeplitz, round robins) are shared default instances, fine for
#: one-off use; a calculation of a P4 program should own an instance from
#: :func:`get_algorithm`, as each BMv2 calculation owns a fresh copy.
ALGORITHMS: dict[str, HashFn] = {
    **_STATELESS,
    **{name: factory() for name, factory in _STATEFUL.items()},
}


def get_algorithm(name: str) -> HashFn:
    """The hash function BMv2 uses for the algorithm ``name``.

    Stateful algorithms (``crc*_custom``, ``toeplitz``, ``round_robin*``) come
    as a new instance with default parameters on each call, like BMv2's
    ``CalculationsMap::get_copy``; stateless ones are shared functions.  As
    BMv2's ``P4Objects::check_hash`` does, the names of :data:`CRC_PRESETS`
    and custom strings such as ``"poly_0x11021_init_0xffff_not_rev"`` are
    accepted too and give a :class:`CustomCrc`.  (Real BMv2 accepts those
    names when loading a JSON but then builds the calculation from
    ``CalculationsMap`` only and dereferences a null pointer on first use.)

    Raises ``ValueError("unknown hash algorithm 'x'")`` otherwise, e.g. for
    v1model's ``random``, which BMv2 does not implement.
    """
    fn = _STATELESS.get(name)
    if fn is not None:
        return fn
    factory = _STATEFUL.get(name)
    if factory is not None:
        return factory()
    config = CRC_PRESETS.get(name) or parse_custom_crc(name)
    if config is not None:
        return CustomCrc(*config)
    raise ValueError(f"unknown hash algorithm {name!r}")


# ---------------------------------------------------------------------------
# How v1model uses a hash value
# ---------------------------------------------------------------------------


def hash_based_offset(hash_value: int, base: int, size: int) -> int:
    """v1model ``hash(result, algo, base, data, max)`` as BMv2 computes it.

    simple_switch's ``modify_field_with_hash_based_offset``:
    ``base + hash % max`` in 64-bit unsigned arithmetic, with ``max == 0``
    treated as 1 (the result is then ``base``).  The caller assigns the result
    to the destination field, which keeps its low bits.
    """
    size &= _M64
    return ((hash_value & _M64) % (size or 1) + (base & _M64)) & _M64


def select_member_index(hash_value: int, group_size: int) -> int:
    """Index of the member an action selector picks in a group of that size.

    BMv2 converts the hash to ``unsigned int`` (the low 32 bits) and takes it
    modulo the group size; the index is into the group's members sorted by
    member handle (ascending).
    """
    if group_size <= 0:
        raise ValueError("empty action selector group")
    return (hash_value & 0xFFFFFFFF) % group_size
