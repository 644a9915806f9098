"""Every ```python block of README.md and of every docs/*.md runs (from the repository root,
in a fresh interpreter, each block in a namespace of its own), so the documentation cannot
drift from the code. Blocks that use PySpark need Java; all of them, README's and the docs',
share one interpreter, one after the other, for a JVM's and a Spark session's start-up is
most of such a block's time (31-36 s each in CI, in processes of their own). Each still
builds its session itself (``getOrCreate``) and binds every name it uses, as a reader's
would; only the JVM and module imports are shared.

Not run: a block addressed to a cluster the reader has (``spark://head:…``,
``sc://host:…``, docs/cluster.md); the same calls run on a real standalone cluster in
``tests/spark/test_cluster.py``."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
#: every docs page, sorted, after the README
DOCS = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))


#: the address of a reader's own cluster in an example
REMOTE = re.compile(r"\b(spark|sc)://(head|host)\b")


def python_blocks(path=README):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [m.group(1) for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]


def _named_blocks():
    """(name, code) of every python block: ``README-block0``, ``docs-guide-block0``…"""
    out = []
    for path in [README, *DOCS]:
        rel = os.path.relpath(path, ROOT)
        stem = rel[:-len(".md")].replace(os.sep, "-")
        out += [(f"{stem}-block{i}", code) for i, code in enumerate(python_blocks(path))
                if not REMOTE.search(code)]
    return out


BLOCKS = python_blocks()
NAMED = _named_blocks()


def _is_spark(code):
    return "pyspark" in code


def test_readme_blocks_found():
    assert len(BLOCKS) >= 4, "README.md lost its examples"


SPARK_BLOCKS = [i for i, b in enumerate(BLOCKS) if _is_spark(b)]

#: runs the blocks named on its command line in order, each in a fresh namespace, and stops
#: at the first that fails, naming it
RUNNER = """
import sys, traceback
for path in sys.argv[1:]:
    with open(path) as f:
        code = compile(f.read(), path, "exec")
    try:
        exec(code, {"__name__": "__main__"})
    except BaseException:
        traceback.print_exc()
        sys.exit(f"README {path.rsplit('/', 1)[-1]} failed")
"""


def _run(codes, tmp_path, names):
    if any(_is_spark(code) for code in codes):
        pytest.importorskip("pyspark")
        if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
            pytest.skip("no Java runtime for the PySpark snippet")
    paths = []
    for code, name in zip(codes, names, strict=True):
        paths.append(tmp_path / f"{name}.py")
        paths[-1].write_text(code)
    (tmp_path / "run_blocks.py").write_text(RUNNER)
    env = dict(os.environ, PYTHONPATH=ROOT, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", MPLBACKEND="Agg")
    res = subprocess.run([sys.executable, str(tmp_path / "run_blocks.py"), *map(str, paths)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert res.returncode == 0, f"--- stderr ---\n{res.stderr[-4000:]}\n--- the blocks ---\n" + "\n".join(codes)


_PLAIN = [(name, code) for name, code in NAMED if not _is_spark(code)]
_SPARK = [(name, code) for name, code in NAMED if _is_spark(code)]


@pytest.mark.parametrize("name,code", _PLAIN, ids=[name for name, _ in _PLAIN])
def test_doc_block(name, code, tmp_path):
    _run([code], tmp_path, [name])


def test_doc_spark_blocks(tmp_path):
    """Every Spark block of README and docs, in one interpreter (one JVM)."""
    assert len(SPARK_BLOCKS) >= 2, "README.md lost its Spark examples"
    _run([code for _, code in _SPARK], tmp_path, [name for name, _ in _SPARK])


def test_block_runner_names_the_failing_block(tmp_path):
    """The shared interpreter must not hide a failure: the second of two blocks fails (a name
    only the first bound), and the run fails naming it."""
    with pytest.raises(AssertionError, match="README block1.py failed"):
        _run(["x = 1\nprint(x)\n", "print(x)\n"], tmp_path, ["block0", "block1"])


def test_only_the_cluster_example_is_not_run():
    """The blocks left out name a reader's cluster, and there is one, in docs/cluster.md."""
    skipped = [(os.path.basename(p), code) for p in [README, *DOCS] for code in python_blocks(p)
               if REMOTE.search(code)]
    assert [name for name, _ in skipped] == ["cluster.md"]
    assert "ship(" in skipped[0][1]
