"""Errors raised while loading a BMv2 JSON program."""


class ProgramError(ValueError):
    """The JSON is not a program softswitch can run; the message names what is wrong."""
