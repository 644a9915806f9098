"""The API reference (docs/api) builds from the docstrings with warnings as errors.

Sphinx runs as a subprocess, as ``make docs`` runs it: ``-W`` turns every warning (a
docstring's broken reST, a name autodoc cannot import, an object described twice) into a
failed build. The reference covers every public name: each name in the ``__all__`` of a
documented module has an entry on its page.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api"

# page -> the modules whose ``__all__`` it documents (entry ids: module.name)
PAGES = {
    "tables": ["pgoutput_codec.tables"],
    "opengauss": ["pgoutput_codec.opengauss", "pgoutput_codec.opengauss.changes"],
    "typecatalog": ["pgoutput_codec.typecatalog"],
    "plan": ["pgoutput_codec.plan"],
    "spark": ["pgoutput_codec.spark"],
    "cli": ["pgoutput_codec.cli"],
    "archive": ["pgoutput_codec.archive"],
    "pgoutput_codec": ["pgoutput_codec.messages"],
}


def _sphinx(src: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-q", "-j", "1", str(src), str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("api")
    r = _sphinx(API, out)
    assert r.returncode == 0, f"the API reference does not build cleanly:\n{r.stderr}{r.stdout}"
    return out


def test_reference_builds_without_warnings(built):
    assert (built / "index.html").is_file()
    for page in PAGES:
        assert (built / f"{page}.html").is_file(), page


def test_top_level_names(built):
    html = (built / "pgoutput_codec.html").read_text()
    import pgoutput_codec
    messages = set(importlib.import_module("pgoutput_codec.messages").__all__)
    for name in pgoutput_codec.__all__:
        owner = "pgoutput_codec.messages" if name in messages else "pgoutput_codec"
        assert f'id="{owner}.{name}"' in html, name
    # the entry carries the docstring, not only the name
    entry = html[html.index('id="pgoutput_codec.snapshot"'):]
    entry = re.sub(r"<[^>]+>", "", entry[:entry.index('id="pgoutput_codec.history"')])
    assert "The table as of commit LSN as_of_lsn" in " ".join(entry.split())


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_public_name_has_an_entry(built, page):
    html = (built / f"{page}.html").read_text()
    for module in PAGES[page]:
        for name in importlib.import_module(module).__all__:
            assert f'id="{module}.{name}"' in html, f"{module}.{name} is missing from {page}.html"


def test_spark_extras_and_plan(built):
    spark = (built / "spark.html").read_text()
    for name in ("decode_changes", "snapshot", "history", "net_changes", "table_changes", "transcode"):
        assert f'id="pgoutput_codec.spark.{name}"' in spark, name
    plan = (built / "plan.html").read_text()
    assert 'id="pgoutput_codec.plan.ControlPlan.build"' in plan


def test_importing_the_spark_layer_starts_no_jvm():
    code = ("import pgoutput_codec.spark\n"
            "from pyspark import SparkContext\n"
            "assert SparkContext._gateway is None and SparkContext._active_spark_context is None\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr


BROKEN = {
    # a name autodoc cannot import
    "missing_name": (".. autofunction:: pgoutput_codec.no_such_function\n", ""),
    # a docstring whose reST is broken (a list that starts without a blank line before it)
    "broken_docstring": (".. autofunction:: brokendoc.f\n",
                         'def f():\n    """Two layouts:\n    - one\n      two\n    """\n'),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_warning_fails_the_build(tmp_path, case):
    """The same configuration, on a page that warns: the build must fail."""
    page, module = BROKEN[case]
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(textwrap.dedent(f"""\
        import runpy, sys
        globals().update(runpy.run_path({str(API / "conf.py")!r}))
        sys.path.insert(0, {str(tmp_path)!r})
        """))
    (src / "index.rst").write_text("Broken\n======\n\n" + page)
    if module:
        (tmp_path / "brokendoc.py").write_text(module)
    r = _sphinx(src, tmp_path / "out")
    assert r.returncode != 0, f"{case}: the build passed:\n{r.stderr}"
    assert "WARNING" in r.stderr or "ERROR" in r.stderr, r.stderr
