"""What the command says on stderr: every failure a user can cause ends as one line,
prefixed with the program's name, and a non-zero exit status; while it reads an archive, a
progress bar and the rows it skips."""

from __future__ import annotations

import contextlib
import os
import sys

from ..errors import first_line

__all__ = ["PROG", "CliError", "first_line", "progress", "note_recaptured"]

PROG = "pgoutput-codec"


class CliError(Exception):
    """A failure to report as one line (no traceback)."""


class _NoBar:
    def update(self, n):
        pass


def progress(total, desc):
    """A tqdm bar over ``total`` messages on stderr (shown on a terminal only), or a bar
    that shows nothing when tqdm is not installed."""
    try:
        from tqdm import tqdm   # optional: the [cli] extra; the bar is a convenience
    except ImportError:
        return contextlib.nullcontext(_NoBar())
    return tqdm(total=total, unit="msg", desc=desc, disable=None, file=sys.stderr, leave=False)


def note_recaptured(part, rows):
    """``iter_archive``'s ``on_recaptured``: the rows of a file a resumed capture wrote twice."""
    print(f"{PROG}: {os.path.basename(part.path)}: skipping {rows} rows re-captured after an "
          "interrupted slot advance", file=sys.stderr)
