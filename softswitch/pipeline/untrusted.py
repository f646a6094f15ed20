"""Values read from a BMv2 JSON program on their way into generated Python source.

A program pushed over P4Runtime is input from the network, and the code generator turns it
into source that the switch executes. So the generator pastes into that source only:

- identifiers it makes itself (a prefix and a counter), never a name from the JSON;
- integers that passed `json_int` (a real int, not a bool, a float or a string of code);
- text that went through `comment` (ASCII, quoted, no line break) or `literal` (a string
  literal `ast.literal_eval` gives back unchanged).
"""
from __future__ import annotations

from .errors import ProgramError

# p4c's largest bit<W> is 2048 bits; the bound only keeps masks and shifts of a malformed
# program from asking for gigabytes.
MAX_BITWIDTH = 1 << 16
# Counter, meter and register arrays are allocated whole at load: a bound keeps one number of
# a pushed program from taking the machine's memory.
MAX_ARRAY_SIZE = 1 << 22
COMMENT_CHARS = 80


def json_int(value: object, where: str, least: int | None = None, most: int | None = None) -> int:
    """``value`` if it is a JSON integer within ``least..most``; else ProgramError naming ``where``."""
    if type(value) is not int:       # bool is an int to Python, not to the JSON format
        raise ProgramError(f"{where} must be an integer, not {_short(value)}")
    if (least is not None and value < least) or (most is not None and value > most):
        bounds = f"{'' if least is None else least}..{'' if most is None else most}"
        raise ProgramError(f"{where} is {value}, outside {bounds}")
    return value


def json_width(value: object, where: str, least: int = 1) -> int:
    """A bit width (or bit offset, with ``least=0``) of at most MAX_BITWIDTH."""
    return json_int(value, where, least, MAX_BITWIDTH)


def json_str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ProgramError(f"{where} must be a string, not {_short(value)}")
    return value


def comment(value: object) -> str:
    """``value`` as text for a ``#`` comment: ASCII, quoted, no line break, short."""
    text = ascii(value)
    return text if len(text) <= COMMENT_CHARS else text[:COMMENT_CHARS - 3] + "..."


def literal(value: object, where: str) -> str:
    """A JSON string as a Python string literal."""
    return ascii(json_str(value, where))


def _short(value: object) -> str:
    return comment(value) if isinstance(value, str) else type(value).__name__
