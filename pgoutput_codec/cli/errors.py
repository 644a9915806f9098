"""The command's one-line failures: every failure a user can cause ends as one line on
stderr, prefixed with the program's name, and a non-zero exit status."""

from __future__ import annotations

__all__ = ["PROG", "CliError", "first_line"]

PROG = "pgoutput-codec"


class CliError(Exception):
    """A failure to report as one line (no traceback)."""


def first_line(e) -> str:
    """The first line of an exception's text (its type's name when it has none)."""
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__
