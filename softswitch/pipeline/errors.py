"""Errors raised while loading a BMv2 JSON program."""

MAX_MESSAGE_CHARS = 400


class ProgramError(ValueError):
    """The JSON is not a program softswitch can run; the message names what is wrong.

    Messages quote names from the JSON, which may hold anything: they are kept to one line
    of printable text (others escaped) and a bounded length, for a command line or a status."""

    def __init__(self, message: str):
        text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(message))
        if len(text) > MAX_MESSAGE_CHARS:
            text = text[:MAX_MESSAGE_CHARS - 3] + "..."
        super().__init__(text)
