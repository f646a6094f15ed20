"""A loaded Program as one C file (generator.py puts the parts together: context,
expressions, primitives, calculations, actions, parser, deparser, tables, controls)."""
from .calculations import ALGORITHM_IDS
from .context import Native, Unsupported
from .generator import CGenerator, generate

__all__ = ["ALGORITHM_IDS", "CGenerator", "Native", "Unsupported", "generate"]
