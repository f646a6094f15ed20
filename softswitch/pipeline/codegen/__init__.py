"""softswitch's Python packet path generated from a BMv2 JSON program (generator.py puts the
parts together: context, actions, parser, calculations, deparser, tables, controls; support.py
holds what the generated code calls)."""
from .actions import MAX_INLINE_LINES, MAX_LOCAL_VARIABLES
from .context import CORE_ERRORS, Source, error_codes, one_of
from .generator import CodeGenerator
from .parser import lookahead_args
from .support import extract_varbit, pack_header
from .tables import by_action, successors

__all__ = ["CORE_ERRORS", "MAX_INLINE_LINES", "MAX_LOCAL_VARIABLES", "CodeGenerator", "Source", "by_action",
           "error_codes", "extract_varbit", "lookahead_args", "one_of", "pack_header",
           "successors"]
