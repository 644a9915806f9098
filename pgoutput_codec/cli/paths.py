"""What a command writes kept apart from what it reads: an output that is the archive, a
file of it, or a file inside its directory (which every later read would take for an
archive file) is refused before anything is written. Paths are compared as the system
resolves them: symbolic links and relative paths followed, hard links by inode."""

from __future__ import annotations

import os

from ..archive import inside_dir, same_file
from .errors import CliError

__all__ = ["refuse_overwrite", "decode_output"]


def decode_output(out: str, default_name: str) -> str:
    """The file ``decode`` writes for OUT (an existing directory: ``default_name`` in it)."""
    return os.path.join(out, default_name) if os.path.isdir(out) else out


def refuse_overwrite(inputs: dict, outputs: dict) -> None:
    """CliError unless every output (``{label: path}``) is apart from every input
    (``{label: path}``: a file, or a directory whose files are read) and from the other
    outputs."""
    outs = [(k, v) for k, v in outputs.items() if v]
    for label, out in outs:
        for in_label, src in inputs.items():
            if same_file(out, src):
                raise CliError(f"{label} {out} is {in_label} {src}: it would be overwritten; write elsewhere")
            if inside_dir(out, src):
                raise CliError(f"{label} {out} is inside {in_label} {src}: it would be read as part of it; "
                               "write elsewhere")
    for i, (label, out) in enumerate(outs):
        for other_label, other in outs[i + 1:]:
            if same_file(out, other):
                raise CliError(f"{label} {out} and {other_label} {other} are the same file; give two paths")
