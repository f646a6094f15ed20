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

import binascii
import functools
import struct
import threading
import zlib
from collections.abc import Callable, Iterable
from typing import NamedTuple

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
# CRCs
# ---------------------------------------------------------------------------


def _reflect(value: int, nbits: int) -> int:
    """Reverse the order of the low ``nbits`` bits of ``value``."""
    return int(format(value & ((1 << nbits) - 1), f"0{nbits}b")[::-1], 2)


@functools.lru_cache(maxsize=64)
def _msb_table(width: int, polynomial: int) -> tuple[int, ...]:
    """BMv2's ``recompute_crc_table``: the MSB-first table of the polynomial."""
    top = 1 << (width - 1)
    mask = (1 << width) - 1
    table = []
    for dividend in range(256):
        rem = dividend << (width - 8)
        for _ in range(8):
            rem = ((rem << 1) ^ polynomial) if rem & top else (rem << 1)
            rem &= mask
        table.append(rem)
    return tuple(table)


@functools.lru_cache(maxsize=64)
def _lsb_table(width: int, polynomial: int) -> tuple[int, ...]:
    """The same table for the reflected (LSB-first) register."""
    table = _msb_table(width, polynomial)
    return tuple(_reflect(table[_reflect(i, 8)], width) for i in range(256))


class CrcConfig(NamedTuple):
    """Parameters of a CRC, in BMv2's ``crc_config_t`` terms.

    ``polynomial`` is given without its top bit (0x8005 for CRC-16), ``init``
    is BMv2's "initial remainder" (not reflected, whatever ``reflect_in``),
    ``xor_out`` its "final xor value", ``reflect_in`` its "data reflected"
    and ``reflect_out`` its "remainder reflected".
    """

    width: int
    polynomial: int
    init: int = 0
    xor_out: int = 0
    reflect_in: bool = False
    reflect_out: bool = False


# Inputs a C-accelerated CRC must agree with the Python one on before it is used: a CRC is
# affine over GF(2), so wrong parameters show on a few short inputs of different lengths.
_CRC_CHECK_INPUTS = (b"", b"\x00", b"\x01", b"\x80", b"\xff", b"123456789", b"\x00" * 13,
                     bytes(range(256)), bytes(range(255, 0, -3)))


# The reference's byte-by-byte table loops (the functions _make_crc_py returns besides zlib's
# and binascii's).
_TABLE_LOOPS = ("crc_lsb", "crc_lsb_noref", "crc_msb_ref", "crc_msb")


def _make_crc(cfg: CrcConfig) -> HashFn:
    """BMv2's ``crc_custom<T>`` for these parameters: crcmod's C code (Debian's python3-crcmod)
    where it gives the same bits as the Python reference on the check inputs, else the
    reference itself."""
    ref = _make_crc_py(cfg)
    if ref.__name__ not in _TABLE_LOOPS:     # zlib or binascii already
        return ref
    for fast in _crcmod_candidates(cfg):
        if all(fast(d) == ref(d) for d in _CRC_CHECK_INPUTS):
            return fast
    return ref


def _crcmod_candidates(cfg: CrcConfig) -> list[HashFn]:
    """crcmod functions that may compute this CRC (none without crcmod or its C extension).
    crcmod reflects input and output together and takes the initial register XOR the final
    value; which way it reads a reflected init is left to the check against the reference."""
    try:
        import crcmod
        from crcmod import _crcfunext  # noqa: F401  (the C code; pure-Python crcmod is slower than ours)
    except ImportError:
        return []
    width, poly, init, xor_out, refin, refout = cfg
    if refin != refout or width not in (8, 16, 24, 32, 64):
        return []
    out = []
    for start in {init, _reflect(init, width)} if refin else {init}:
        try:
            out.append(crcmod.mkCrcFun((1 << width) | poly, initCrc=start ^ xor_out, rev=refin, xorOut=xor_out))
        except ValueError:       # a polynomial crcmod does not take
            pass
    return out


def _make_crc_py(cfg: CrcConfig) -> HashFn:
    """A function computing exactly what BMv2's ``crc_custom<T>`` computes.

    BMv2 keeps the remainder MSB first and reflects each data byte when
    ``reflect_in``; that is the same as the classic reflected (LSB-first)
    algorithm run on the reflected register, which is what is done here.
    zlib / binascii are used where they compute the same thing.
    """
    width, poly, init, xor_out, refin, refout = cfg
    mask = (1 << width) - 1

    if refin:
        rinit = _reflect(init, width)
        if width == 32 and poly == 0x04C11DB7:
            # zlib keeps the reflected register complemented.
            zstart = rinit ^ 0xFFFFFFFF
            if refout:
                post = 0xFFFFFFFF ^ xor_out

                def crc_zlib(data: bytes, _crc=zlib.crc32) -> int:
                    return _crc(data, zstart) ^ post

                return crc_zlib

            def crc_zlib_noref(data: bytes, _crc=zlib.crc32) -> int:
                return _reflect(_crc(data, zstart) ^ 0xFFFFFFFF, 32) ^ xor_out

            return crc_zlib_noref

        rtable = _lsb_table(width, poly)
        if refout:

            def crc_lsb(data: bytes, _t=rtable) -> int:
                crc = rinit
                for b in data:
                    crc = (crc >> 8) ^ _t[(crc ^ b) & 0xFF]
                return crc ^ xor_out

            return crc_lsb

        def crc_lsb_noref(data: bytes, _t=rtable) -> int:
            crc = rinit
            for b in data:
                crc = (crc >> 8) ^ _t[(crc ^ b) & 0xFF]
            return _reflect(crc, width) ^ xor_out

        return crc_lsb_noref

    if width == 16 and poly == 0x1021:
        if refout:

            def crc_hqx_ref(data: bytes, _crc=binascii.crc_hqx) -> int:
                return _reflect(_crc(data, init), 16) ^ xor_out

            return crc_hqx_ref

        def crc_hqx(data: bytes, _crc=binascii.crc_hqx) -> int:
            return _crc(data, init) ^ xor_out

        return crc_hqx

    table = _msb_table(width, poly)
    shift = width - 8
    if refout:

        def crc_msb_ref(data: bytes, _t=table) -> int:
            crc = init
            for b in data:
                crc = ((crc << 8) & mask) ^ _t[(crc >> shift) ^ b]
            return _reflect(crc, width) ^ xor_out

        return crc_msb_ref

    def crc_msb(data: bytes, _t=table) -> int:
        crc = init
        for b in data:
            crc = ((crc << 8) & mask) ^ _t[(crc >> shift) ^ b]
        return crc ^ xor_out

    return crc_msb


class CustomCrc:
    """A CRC whose parameters can be changed at run time (BMv2 ``crc*_custom``).

    ``width`` is 8, 16, 32 or 64 (BMv2's ``uint8_t`` .. ``uint64_t``) and
    cannot change; :meth:`configure` replaces the other parameters like
    ``set_crc16_parameters`` / ``set_crc32_parameters`` do.  Calling the object
    computes the CRC of a ``bytes``-like buffer.  Reconfiguring while other
    threads hash is safe: they see either the old or the new parameters.
    """

    __slots__ = ("_config", "_fn")

    WIDTHS = (8, 16, 32, 64)

    def __init__(
        self,
        width: int,
        polynomial: int,
        init: int = 0,
        xor_out: int = 0,
        reflect_in: bool = False,
        reflect_out: bool = False,
    ) -> None:
        if width not in self.WIDTHS:
            raise ValueError(f"unsupported CRC width {width} (expected 8, 16, 32 or 64)")
        self._config = CrcConfig(width, 0, 0, 0, False, False)  # width for configure()
        self._fn: HashFn
        self.configure(polynomial, init, xor_out, reflect_in, reflect_out)

    @classmethod
    def default(cls, width: int) -> CustomCrc:
        """A CRC with BMv2's default parameters for ``crc{width}_custom``."""
        return cls(*_CUSTOM_DEFAULTS[width])

    @property
    def width(self) -> int:
        return self._config.width

    @property
    def config(self) -> CrcConfig:
        """The current parameters."""
        return self._config

    def configure(
        self,
        polynomial: int,
        init: int,
        xor_out: int,
        reflect_in: bool,
        reflect_out: bool,
    ) -> None:
        """Set new parameters (each value must fit in ``width`` bits)."""
        width = self._config.width
        for label, value in (("polynomial", polynomial), ("init", init), ("xor_out", xor_out)):
            if value < 0 or value >> width:
                raise ValueError(f"CRC{width} {label} {value:#x} does not fit in {width} bits")
        config = CrcConfig(width, polynomial, init, xor_out, bool(reflect_in), bool(reflect_out))
        fn = _make_crc(config)
        # One assignment each; a concurrent caller may see the new function
        # with the old config for an instant, never a half-built table.
        self._fn = fn
        self._config = config

    def __call__(self, data: bytes) -> int:
        return self._fn(data)

    def __repr__(self) -> str:
        c = self._config
        return (
            f"CustomCrc(width={c.width}, polynomial={c.polynomial:#x}, init={c.init:#x}, "
            f"xor_out={c.xor_out:#x}, reflect_in={c.reflect_in}, reflect_out={c.reflect_out})"
        )


# crc_custom_init<T>::config in calculations.cpp.
_CUSTOM_DEFAULTS: dict[int, CrcConfig] = {
    8: CrcConfig(8, 0x07, 0x00, 0x00, False, False),
    16: CrcConfig(16, 0x8005, 0x0000, 0x0000, True, True),
    32: CrcConfig(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True),
    64: CrcConfig(64, 0x1B, 0, 0, True, True),
}

# The predefined CRCs of BMv2's CrcMap (crc_map.cpp, crcmod names with '-'
# replaced by '_').
CRC_PRESETS: dict[str, CrcConfig] = {
    "crc_8": CrcConfig(8, 0x07, 0x00, 0x00, False, False),
    "crc_8_darc": CrcConfig(8, 0x39, 0x00, 0x00, True, True),
    "crc_8_i_code": CrcConfig(8, 0x1D, 0xFD, 0x00, False, False),
    "crc_8_itu": CrcConfig(8, 0x07, 0x00, 0x55, False, False),
    "crc_8_maxim": CrcConfig(8, 0x31, 0x00, 0x00, True, True),
    "crc_8_rohc": CrcConfig(8, 0x07, 0xFF, 0x00, True, True),
    "crc_8_wcdma": CrcConfig(8, 0x9B, 0x00, 0x00, True, True),
    "crc_16": CrcConfig(16, 0x8005, 0x0000, 0x0000, True, True),
    "crc_16_buypass": CrcConfig(16, 0x8005, 0x0000, 0x0000, False, False),
    "crc_16_dds_110": CrcConfig(16, 0x8005, 0x800D, 0x0000, False, False),
    "crc_16_dect": CrcConfig(16, 0x0589, 0x0000, 0x0001, False, False),
    "crc_16_dnp": CrcConfig(16, 0x3D65, 0x0000, 0xFFFF, True, True),
    "crc_16_en_13757": CrcConfig(16, 0x3D65, 0x0000, 0xFFFF, False, False),
    "crc_16_genibus": CrcConfig(16, 0x1021, 0xFFFF, 0xFFFF, False, False),
    "crc_16_maxim": CrcConfig(16, 0x8005, 0x0000, 0xFFFF, True, True),
    "crc_16_mcrf4xx": CrcConfig(16, 0x1021, 0xFFFF, 0x0000, True, True),
    "crc_16_riello": CrcConfig(16, 0x1021, 0xB2AA, 0x0000, True, True),
    "crc_16_t10_dif": CrcConfig(16, 0x8BB7, 0x0000, 0x0000, False, False),
    "crc_16_teledisk": CrcConfig(16, 0xA097, 0x0000, 0x0000, False, False),
    "crc_16_usb": CrcConfig(16, 0x8005, 0xFFFF, 0xFFFF, True, True),
    "x_25": CrcConfig(16, 0x1021, 0xFFFF, 0xFFFF, True, True),
    "xmodem": CrcConfig(16, 0x1021, 0x0000, 0x0000, False, False),
    "modbus": CrcConfig(16, 0x8005, 0xFFFF, 0x0000, True, True),
    "kermit": CrcConfig(16, 0x1021, 0x0000, 0x0000, True, True),
    "crc_ccitt_false": CrcConfig(16, 0x1021, 0xFFFF, 0x0000, False, False),
    "crc_aug_ccitt": CrcConfig(16, 0x1021, 0x1D0F, 0x0000, False, False),
    "crc_32": CrcConfig(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True),
    "crc_32_bzip2": CrcConfig(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, False, False),
    "crc_32c": CrcConfig(32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, True, True),
    "crc_32d": CrcConfig(32, 0xA833982B, 0xFFFFFFFF, 0xFFFFFFFF, True, True),
    "crc_32_mpeg": CrcConfig(32, 0x04C11DB7, 0xFFFFFFFF, 0x00000000, False, False),
    "posix": CrcConfig(32, 0x04C11DB7, 0x00000000, 0xFFFFFFFF, False, False),
    "crc_32q": CrcConfig(32, 0x814141AB, 0x00000000, 0x00000000, False, False),
    "jamcrc": CrcConfig(32, 0x04C11DB7, 0xFFFFFFFF, 0x00000000, True, True),
    "xfer": CrcConfig(32, 0x000000AF, 0x00000000, 0x00000000, False, False),
    "crc_64": CrcConfig(64, 0x1B, 0, 0, True, True),
    "crc_64_we": CrcConfig(64, 0x42F0E1EBA9EA3693, _M64, _M64, False, False),
    "crc_64_jones": CrcConfig(64, 0xAD93D23594C935A9, _M64, 0, True, True),
}


def _parse_custom_crc(spec: str) -> CrcConfig | None:
    """BMv2's ``CrcMap::get_copy_from_custom_str``, or None if it rejects it.

    ``poly_0x1<hex>[_init_<hex>][_xout_<hex>][_not_rev]``: the polynomial is
    written with its top bit, whose position gives the width (8/16/32/64);
    init and xout default to 0; the CRC is reflected unless ``not_rev``.
    ``lsb``, ``msb`` and ``extend`` are not supported (by BMv2 either).
    """
    tokens = spec.split("_")
    poly_s = init_s = xout_s = ""
    reflected = True
    i = 0

    def take() -> str:
        nonlocal i
        tok = tokens[i] if i < len(tokens) else ""
        i += 1
        return tok

    while i < len(tokens):
        tok = take()
        if tok == "":
            break
        if tok == "poly":
            poly_s = take()
            if not poly_s:
                return None
        elif tok == "init":
            init_s = take()
            if not init_s:
                return None
        elif tok == "xout":
            xout_s = take()
            if not xout_s:
                return None
        elif tok == "not" and take() == "rev":
            reflected = False
        else:
            return None
    if len(poly_s) < 3 or not poly_s.startswith("0x1"):
        return None
    width = (len(poly_s) - 3) * 4
    if width not in CustomCrc.WIDTHS:
        return None
    mask = (1 << width) - 1
    try:
        poly = int(poly_s[3:] or "0", 16) & mask
        init = int(init_s, 16) & mask if init_s else 0
        xout = int(xout_s, 16) & mask if xout_s else 0
    except ValueError:
        return None
    return CrcConfig(width, poly, init, xout, reflected, reflected)


crc16: HashFn = _make_crc(_CUSTOM_DEFAULTS[16])
crc16.__name__ = crc16.__qualname__ = "crc16"
crc16.__doc__ = "BMv2 ``crc16``: CRC-16/ARC (poly 0x8005, init 0, reflected, xorout 0)."


def crc32(data: bytes) -> int:
    """BMv2 ``crc32``: the standard CRC-32, identical to ``zlib.crc32``."""
    return zlib.crc32(data)


def crc_ccitt(data: bytes) -> int:
    """BMv2 ``crcCCITT``: CRC-16/CCITT-FALSE (0x1021, init 0xFFFF, not reflected)."""
    return binascii.crc_hqx(data, 0xFFFF)


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
    config = CRC_PRESETS.get(name) or _parse_custom_crc(name)
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
