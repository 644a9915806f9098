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
    assert len(BLOCKS) >= 4, "README.md lost its examples"


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
