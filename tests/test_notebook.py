"""notebooks/quickstart.ipynb runs top to bottom (nbclient, the venv's ``python3`` kernel),
so the quickstart never rots: local decoding always, Spark when a JVM is available. The
documentation build (tests/test_docs.py) executes its local path into the site."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "notebooks", "quickstart.ipynb")


def _kernel_spec_dir(tmp_path):
    """A kernelspec named python3 that runs *this* interpreter (the venv), whatever else
    is installed on the machine."""
    pytest.importorskip("ipykernel", reason="ipykernel missing: pip install '.[test]'")
    d = tmp_path / "jupyter" / "kernels" / "python3"
    d.mkdir(parents=True)
    import json

    (d / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (pgoutput_codec venv)", "language": "python"}))
    return str(tmp_path / "jupyter")


def _run(tmp_path, env):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    jdir = _kernel_spec_dir(tmp_path)
    old = dict(os.environ)
    os.environ.update(env, JUPYTER_PATH=jdir, JUPYTER_DATA_DIR=jdir,
                      PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    os.environ.pop("MPLBACKEND", None)   # the kernel's inline backend makes the figure an output
    try:
        nb = nbformat.read(NOTEBOOK, as_version=4)
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    return nb


def _outputs(nb):
    return "\n".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_quickstart_local(tmp_path):
    nb = _run(tmp_path, {"QUICKSTART_SPARK": "0"})
    out = _outputs(nb)
    assert "2630 messages" in out
    assert any(o.get("data", {}).get("image/png") for c in nb.cells if c.cell_type == "code"
               for o in c.get("outputs", [])), "no plot"


@pytest.mark.slow
def test_quickstart_spark(tmp_path):
    pytest.importorskip("pyspark")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("no Java runtime")
    try:
        import pgoutput_codec.spark.changes  # noqa: F401
    except ImportError:
        pytest.skip("pgoutput_codec.spark.changes not available")
    nb = _run(tmp_path, {"QUICKSTART_SPARK": "1", "SPARK_LOCAL_IP": "127.0.0.1"})
    assert "2630 messages" in _outputs(nb)
