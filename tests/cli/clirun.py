"""Running the ``pgoutput-codec`` command in a fresh interpreter, as a user does, and what
a clean failure looks like (one line on stderr, non-zero exit, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys

from pgoutput_codec.data import sample_archive_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = sample_archive_path()


def run_cli(*args, env=None, timeout=300, prefix=()):
    e = dict(os.environ, PYTHONPATH=ROOT)
    e.update(env or {})
    return subprocess.run([sys.executable, *prefix, "-m", "pgoutput_codec.cli", *args], capture_output=True,
                          text=True, env=e, timeout=timeout, cwd=ROOT)


def assert_clean_failure(res, *needles):
    assert res.returncode != 0, res
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    for n in needles:
        assert n in lines[0], lines[0]
