"""The documentation site (docs/: the guides, the quickstart notebook executed, the API
reference of docs/api from the docstrings) builds with warnings as errors.

Sphinx runs as a subprocess, as ``make docs`` runs it: ``-W`` turns every warning (a
docstring's broken reST, a name autodoc cannot import, an object described twice, a guide's
link to a page or heading that is not there, a page in no table of contents, a notebook
cell that raises) into a failed build. The reference covers every public name: each name
in the ``__all__`` of a documented package has an entry on its page.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# page of docs/api -> the packages whose ``__all__`` it documents (entry ids: package.name)
PAGES = {
    "pgoutput_codec": ["pgoutput_codec"],
    "tables": ["pgoutput_codec.tables"],
    "lake": ["pgoutput_codec.lake"],
    "opengauss": ["pgoutput_codec.opengauss", "pgoutput_codec.opengauss.changes"],
    "typecatalog": ["pgoutput_codec.typecatalog"],
    "changes": ["pgoutput_codec.changes"],
    "spark": ["pgoutput_codec.spark"],
    "cli": ["pgoutput_codec.cli"],
    "archive": ["pgoutput_codec.archive"],
}


def _sphinx(src: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-q", "-j", "1", str(src), str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    r = _sphinx(DOCS, out)
    assert r.returncode == 0, f"the documentation site does not build cleanly:\n{r.stderr}{r.stdout}"
    return out


def test_site_builds_without_warnings(built):
    assert (built / "index.html").is_file()
    assert (built / "api" / "index.html").is_file()
    for page in PAGES:
        assert (built / "api" / f"{page}.html").is_file(), page
    for guide in DOCS.glob("*.md"):
        assert (built / f"{guide.stem}.html").is_file(), guide.name


def test_guides_link_as_pages(built):
    """A guide's relative ``.md`` link is a link to the other guide's page in the site."""
    index = (built / "index.html").read_text()
    for guide in ("guide", "types", "limits", "benchmarks", "quickstart"):
        assert f'href="{guide}.html"' in index, guide
    assert 'href="api/index.html"' in index
    assert ".md\"" not in index


def test_quickstart_is_executed_into_the_site(built):
    """The notebook's outputs are in its page: the printed counts, the tables, the plot."""
    html = (built / "quickstart.html").read_text()
    assert "2630 messages" in html
    assert html.count('class="dataframe') >= 2, "the notebook's tables are missing"
    images = re.findall(r'<img [^>]*src="(_images/[^"]+\.png)"', html)
    assert images, "the notebook's plot is missing"
    assert all((built / src).stat().st_size > 1000 for src in images)


def test_readme_links_into_the_docs_resolve(built):
    """Every README link into docs/ names a page of the site and, with a #fragment, a
    heading of that page."""
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)", readme)
    assert links
    for path, fragment in links:
        assert (ROOT / path).is_file(), path
        page = built / Path(path).relative_to("docs").with_suffix(".html")
        assert page.is_file(), path
        if fragment:
            assert f'id="{fragment}"' in page.read_text(), f"{path}#{fragment}"


# a time, a rate or a ratio as a figure: "31 M messages/s", "0.4 s", "26 µs", "3.5×", "1.7x faster"
FIGURE = re.compile(r"(?<![\w.])\d[\d.,]*(?:[–-]\d[\d.,]*)?\s?(?:×|x(?=\s(?:faster|slower|the)\b)|ms\b|µs\b|s\b"
                    r"|[kMG]?B/s\b|[kM]?\s?(?:msg|messages|values|rows|records|changes|transactions)/s\b)")
# what looks like a figure and is not one: a value, a setting, a formula of the limits,
# PostgreSQL's behaviour
NOT_FIGURES = {
    ("docs/conformance.md", "60 s"),                  # each fuzz harness's run length
    ("docs/guide.md", "4 ×"),                         # the pieces' memory rule
    ("docs/limits.md", "8 ×"),                        # the memory bound's formula
    ("docs/limits.md", "86,400,000,000 µs"),          # the value of time 24:00:00
    ("docs/types.md", "000 µs"),                      # the same value
    ("docs/protocol.md", "15 s"),                     # how long PostgreSQL's peek can wait
    ("pgoutput_codec/schema.py", "000 µs"),           # the epoch shift, a constant
}


def _prose():
    """(path, text) of the README, every guide but benchmarks.md (code blocks left out),
    and the docstrings and ``#:`` comments of the package, Spark's too (the API
    reference's text)."""
    for path in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        if path.name != "benchmarks.md":
            yield path, re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    for path in sorted([*ROOT.glob("pgoutput_codec/**/*.py"), *ROOT.glob("pgoutput_codec/**/*.pyx")]):
        src = path.read_text()
        parts = re.findall(r'"""(.*?)"""', src, flags=re.S) + re.findall(r"^\s*#:(.*)$", src, flags=re.M)
        yield path, "\n".join(parts)


def test_figures_only_in_benchmarks():
    """Times, rates and ratios are measured in one place, docs/benchmarks.md, with the
    command that reproduces each: elsewhere a figure would go stale unseen."""
    found = []
    for path, text in _prose():
        rel = path.relative_to(ROOT).as_posix()
        for m in FIGURE.finditer(text):
            if (rel, m.group()) not in NOT_FIGURES:
                found.append(f"{rel}: {m.group()!r} in {' '.join(text[max(0, m.start() - 60):m.end() + 20].split())!r}")
    assert not found, "figures outside docs/benchmarks.md:\n" + "\n".join(found)


def test_figure_pattern():
    for figure in ("31.2 M messages/s", "4.3 GB/s", "0.4 s", "26 µs", "3.5×", "0.86–0.96 ×", "1.7x faster", "130 k msg/s"):
        assert FIGURE.search(f"takes {figure} here"), figure
    for text in ("PySpark 4.x", "b'12x'", "32 MiB", "2 M messages"):
        assert not FIGURE.search(text), text


def test_top_level_names(built):
    html = (built / "api" / "pgoutput_codec.html").read_text()
    # the message classes are entries of the package, whichever module defines them
    for name in ("Begin", "Insert", "MESSAGE_CLASSES", "parse_lsn"):
        assert f'id="pgoutput_codec.{name}"' in html, name
    # the entry carries the docstring, not only the name
    entry = html[html.index('id="pgoutput_codec.snapshot"'):]
    entry = re.sub(r"<[^>]+>", "", entry[:entry.index('id="pgoutput_codec.history"')])
    assert "The table as of commit LSN as_of_lsn" in " ".join(entry.split())


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_public_name_has_an_entry(built, page):
    html = (built / "api" / f"{page}.html").read_text()
    for module in PAGES[page]:
        for name in importlib.import_module(module).__all__:
            assert f'id="{module}.{name}"' in html, f"{module}.{name} is missing from {page}.html"


def test_spark_extras_and_plan(built):
    spark = (built / "api" / "spark.html").read_text()
    for name in ("decode_changes", "snapshot", "history", "net_changes", "table_changes", "transcode"):
        assert f'id="pgoutput_codec.spark.{name}"' in spark, name
    plan = (built / "api" / "changes.html").read_text()
    assert 'id="pgoutput_codec.changes.ControlPlan.build"' in plan


def test_importing_the_spark_layer_starts_no_jvm():
    code = ("import pgoutput_codec.spark\n"
            "from pyspark import SparkContext\n"
            "assert SparkContext._gateway is None and SparkContext._active_spark_context is None\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr


BROKEN = {
    # a name autodoc cannot import
    "missing_name": ("index.rst", ".. autofunction:: pgoutput_codec.no_such_function\n", "", "no_such_function"),
    # a docstring whose reST is broken (a list that starts without a blank line before it)
    "broken_docstring": ("index.rst", ".. autofunction:: brokendoc.f\n",
                         'def f():\n    """Two layouts:\n    - one\n      two\n    """\n', "brokendoc"),
    # a guide's link to a page that is not there
    "missing_page": ("index.md", "See [the other guide](nowhere.md).\n", "", "nowhere.md"),
    # a guide's link to a heading that is not there, on its own page or another
    "missing_heading": ("index.md", "## Here\n\nSee [above](#no-such-heading).\n", "", "no-such-heading"),
    "missing_heading_of_page": ("index.md", "See [there](other.md#nope).\n\n```{toctree}\nother\n```\n", "",
                                "'nope'"),
    # a guide in no table of contents (docs/index.md's lists every page)
    "page_in_no_toctree": ("index.md", "Nothing lists the other page.\n", "", "any toctree"),
    # a notebook cell that raises
    "raising_notebook": ("index.md", "```{toctree}\nnb\n```\n", "", "the quickstart is broken"),
}
# the other pages of a case's site
OTHER_PAGES = {
    "missing_heading_of_page": {"other.md": "# Other\n\n## A heading\n"},
    "page_in_no_toctree": {"other.md": "# Other\n"},
    "raising_notebook": {"nb.ipynb": json.dumps({
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [{"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": None, "outputs": [],
                   "source": "raise ValueError('the quickstart is broken')"}],
    })},
}


def test_the_notebook_runs_in_this_interpreter(tmp_path):
    """The quickstart's kernel (``python3``) is the interpreter that builds the docs, with
    this checkout's package, whatever other ``python3`` kernel the machine offers."""
    decoy = tmp_path / "jupyter" / "kernels" / "python3"
    decoy.mkdir(parents=True)
    (decoy / "kernel.json").write_text(json.dumps({
        "argv": [str(tmp_path / "no-such-python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "another Python", "language": "python"}))
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(f"import runpy\nglobals().update(runpy.run_path({str(DOCS / 'conf.py')!r}))\n")
    (src / "index.md").write_text("# Site\n\n```{toctree}\nnb\n```\n")
    (src / "nb.ipynb").write_text(json.dumps({
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [{"cell_type": "markdown", "id": "t", "metadata": {}, "source": "# The kernel"},
                  {"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": None, "outputs": [],
                   "source": "import sys, pgoutput_codec\nprint(sys.executable, pgoutput_codec.__file__)"}]}))
    r = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-q", "-j", "1", str(src), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "JUPYTER_PATH": str(tmp_path / "jupyter"), "PYTHONPATH": ""})
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "out" / "nb.html").read_text()
    assert f"{sys.executable} {ROOT / 'pgoutput_codec' / '__init__.py'}" in html


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_warning_fails_the_build(tmp_path, case):
    """The same configuration, on a page that warns: the build must fail."""
    index, page, module, needle = BROKEN[case]
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(textwrap.dedent(f"""\
        import runpy, sys
        globals().update(runpy.run_path({str(DOCS / "conf.py")!r}))
        sys.path.insert(0, {str(tmp_path)!r})
        """))
    title = "Broken\n======\n\n" if index.endswith(".rst") else "# Broken\n\n"
    (src / index).write_text(title + page)
    for name, text in OTHER_PAGES.get(case, {}).items():
        (src / name).write_text(text)
    if module:
        (tmp_path / "brokendoc.py").write_text(module)
    r = _sphinx(src, tmp_path / "out")
    assert r.returncode != 0, f"{case}: the build passed:\n{r.stderr}"
    assert needle in r.stderr, r.stderr
