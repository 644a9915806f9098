"""The command's one-line failures: every failure a user can cause ends as one line on
stderr, prefixed with the program's name, and a non-zero exit status."""

from __future__ import annotations

from ..errors import first_line

__all__ = ["PROG", "CliError", "first_line"]

PROG = "pgoutput-codec"


class CliError(Exception):
    """A failure to report as one line (no traceback)."""
