"""``python -m aifabric.cli``: the ``aifabric`` command."""
import sys

from aifabric.cli import main

sys.exit(main())
