"""What the command lines share (``softswitch``, ``softswitch-ctl``, and aifabric's): the
argument parser whose errors are one line."""
from __future__ import annotations

import argparse


class OneLineErrors(argparse.ArgumentParser):
    """Bad arguments: one line naming the problem (and where to look), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
