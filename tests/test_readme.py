"""Every ```python block of README.md runs (each in a fresh interpreter, from the repository
root), so the README cannot drift from the code. Blocks that use PySpark need Java."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")


def python_blocks(path=README):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [m.group(1) for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]


BLOCKS = python_blocks()


def test_readme_blocks_found():
    if not BLOCKS:
        pytest.skip("README.md has no ```python blocks yet (docs/README_front.md holds the sections to merge)")


def test_front_sections_blocks_run(tmp_path):
    """The sections waiting in docs/README_front.md run too (until they are merged)."""
    front = os.path.join(ROOT, "docs", "README_front.md")
    if not os.path.exists(front):
        pytest.skip("no docs/README_front.md")
    for i, code in enumerate(python_blocks(front)):
        _run(code, tmp_path, f"front{i}")


def _run(code, tmp_path, name):
    if "pyspark" in code:
        pytest.importorskip("pyspark")
        if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
            pytest.skip("no Java runtime for the PySpark snippet")
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=ROOT, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", MPLBACKEND="Agg")
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                         cwd=ROOT, env=env)
    assert res.returncode == 0, f"README block {name} failed:\n{code}\n--- stderr ---\n{res.stderr[-4000:]}"


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_block(i, tmp_path):
    _run(BLOCKS[i], tmp_path, f"block{i}")
