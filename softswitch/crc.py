"""BMv2's CRCs, bit-exact: the fixed ones (``crc16``, ``crc32``, ``crcCCITT``) and
:class:`CustomCrc`, the ``crc{8,16,32,64}_custom`` whose parameters the control plane sets at
run time (``set_crc16_parameters`` / ``set_crc32_parameters``), with the presets and the
custom-name strings BMv2 accepts (see :mod:`softswitch.hashes` for every algorithm)."""

from __future__ import annotations

import binascii
import functools
import zlib
from collections.abc import Callable
from typing import NamedTuple

HashFn = Callable[[bytes], int]

_M64 = (1 << 64) - 1


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


def parse_custom_crc(spec: str) -> CrcConfig | None:
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
