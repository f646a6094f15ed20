"""What an STF run can fail with before any packet is compared."""


class StfError(ValueError):
    """A line that is not an STF statement, or names what the program lacks; the message
    names the file's line."""


class Unsupported(Exception):
    """The test needs something the target (or this runner) does not do; the message names it."""
