"""Lint is part of the tests: ruff for ``.py``, cython-lint (+ pycodestyle) for ``.pyx``/``.pxd``.

Both run from the interpreter's own environment, so the versions are the ones the
``test`` extra pins. cython-lint finds ``[tool.cython-lint]`` in ``pyproject.toml`` and
runs pycodestyle as a subprocess found on PATH, hence the PATH below.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RUFF_PATHS = ["pgoutput_codec", "tests", "bench", "tools"]


def _tool(name: str) -> str:
    exe = BIN / name
    if exe.exists():
        return str(exe)
    found = shutil.which(name)
    if found is None:  # not a skip: the test extra installs these
        pytest.fail(f"{name} is not installed (pip install -e '.[test]')")
    return found


def _run(args, cwd=ROOT):
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_ruff():
    r = _run([_tool("ruff"), "check", "--no-cache", "--output-format", "concise", *RUFF_PATHS])
    assert r.returncode == 0, f"ruff findings:\n{r.stdout}{r.stderr}"


def test_cython_lint():
    _tool("pycodestyle")
    r = _run([_tool("cython-lint"), "pgoutput_codec"])
    assert r.returncode == 0, f"cython-lint findings:\n{r.stdout}{r.stderr}"


def test_cython_lint_catches_findings(tmp_path):
    """The linters really check (pycodestyle reachable, the 110-column limit read)."""
    cfg = (ROOT / "pyproject.toml").read_text()
    section = cfg[cfg.index("[tool.cython-lint]"):].split("\n[", 1)[0]
    (tmp_path / "pyproject.toml").write_text(section + "\n")
    bad = tmp_path / "bad.pyx"
    bad.write_text(
        "from libc.stdint cimport int64_t, uint8_t\n\n\n"
        "cdef uint8_t first(const uint8_t* p) noexcept nogil:\n"
        "    return p[0]\n\n\n"
        f"X = {'1' * 106}\n"  # 110 columns: allowed
        f"Y = {'2' * 107}\n"  # 111 columns: too long
        "Z = 1; W = 2\n"
    )
    r = _run([_tool("cython-lint"), str(bad)], cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "'int64_t' imported but unused" in out
    assert ":9:111: E501" in out and ":8:" not in out, out
    assert "E702" in out, out


def test_ruff_catches_findings(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    r = _run([_tool("ruff"), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)])
    assert r.returncode != 0 and "F401" in r.stdout, r.stdout + r.stderr
