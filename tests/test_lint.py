"""Lint is part of the tests: ruff for ``.py``, cython-lint (+ pycodestyle) for ``.pyx``/``.pxd``.

Both run from the interpreter's own environment, so the versions are the ones the
``test`` extra pins. cython-lint finds ``[tool.cython-lint]`` in ``pyproject.toml`` and
runs pycodestyle as a subprocess found on PATH, hence the PATH below.
"""

from __future__ import annotations

import json
import os
import re
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
    bad.write_text("import os\nfrom pyspark.sql import _typing\n")
    r = _run([_tool("ruff"), "check", "--no-cache", "--output-format", "json", "--config",
              str(ROOT / "pyproject.toml"), str(bad)])
    codes = {f["code"] for f in json.loads(r.stdout)}
    assert r.returncode != 0 and {"F401", "PLC2701"} <= codes, r.stdout + r.stderr


# ---------------------------------------------------------------- the package's shape
PACKAGE = ROOT / "pgoutput_codec"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.is_dir() or any(base.with_suffix(s).exists() for s in (".py", ".pyx"))


#: a one-line Python import in a Cython module (``cimport`` lines are C declarations)
_PY_IMPORT = re.compile(r"^\s*(from\s+[.\w]+\s+import\s+(?!.*\bcimport\b)[\w, ]+|import\s+[\w.]+(\s+as\s+\w+)?)\s*(#.*)?$")


def private_imports(paths) -> list[str]:
    """``from X import _name`` where X is another module of the package and ``_name`` is not
    a module (a private module imported whole, as ``from . import _changes``, is how a
    compiled core sits behind its Python module). ruff's PLC2701 does not see these: it
    skips every import from the importer's own top-level package. Cython ``cimport``s of
    ``.pxd`` declarations are the C interface and are not counted."""
    import ast
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".pyx":   # only the Python import statements of a Cython module
            text = "\n".join(line.strip() for line in text.splitlines() if _PY_IMPORT.match(line))
        me = _module_name(path)
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            if not source.startswith("pgoutput_codec") or source == me:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__") \
                        and not _is_module(f"{source}.{alias.name}"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {source}.{alias.name}")
    return found


def test_no_module_imports_a_private_name_of_another():
    files = sorted(p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".pyx"))
    assert len(files) > 40
    found = private_imports(files)
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def test_private_imports_are_found(tmp_path, monkeypatch):
    """The check above sees a private name taken from another module, absolutely or
    relatively, and lets a private module and a module's own names pass."""
    pkg = ROOT / "pgoutput_codec"
    bad = pkg / "opengauss" / "__lint_probe__.py"
    assert not bad.exists()
    bad.write_text("from ..changes import _CHANGE_TAGS\nfrom pgoutput_codec.changes.tags import _probe\n"
                   "from ..pgoutput import _batch\nfrom ._parse_py import ENVELOPES\n")
    try:
        found = private_imports([bad])
    finally:
        bad.unlink()
    assert [f.rsplit(": ", 1)[1] for f in found] == ["pgoutput_codec.changes._CHANGE_TAGS",
                                                     "pgoutput_codec.changes.tags._probe"]


def test_import_contracts():
    """The layers, the package's acyclic modules and where PySpark may be imported
    (``[tool.importlinter]`` in pyproject.toml)."""
    r = _run([_tool("lint-imports"), "--no-cache"])
    assert r.returncode == 0, f"import contracts broken:\n{r.stdout}{r.stderr}"
    assert "0 broken" in r.stdout


def test_import_contracts_catch_breaks(tmp_path):
    """lint-imports really checks: an upward import and a cycle break the contracts."""
    pkg = tmp_path / "layered"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("from . import high\n")
    (pkg / "high.py").write_text("from . import low\n")
    cfg = tmp_path / "contracts.ini"
    cfg.write_text("[importlinter]\nroot_package = layered\n\n"
                   "[importlinter:contract:layers]\nname = Up only\ntype = layers\ncontainers = layered\n"
                   "layers =\n    high\n    low\n\n"
                   "[importlinter:contract:cycles]\nname = No cycles\ntype = acyclic_siblings\n"
                   "ancestors =\n    layered\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path), PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    r = subprocess.run([_tool("lint-imports"), "--no-cache", str(cfg)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "Up only BROKEN" in r.stdout and "No cycles BROKEN" in r.stdout, r.stdout


def test_the_project_speaks_of_the_product_only():
    """No text of the repository tells the story of its making by the names that story
    uses (work stops, issue numbers, run names); history lives in git and CHANGELOG.md."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    r = _run(["git", "grep", "--untracked", "-nE", r"[Ss]top [0-9]|issue [0-9]|fresh[0-9]", "--", ".",
              ":!tests/test_lint.py"])
    assert r.returncode == 1 and not r.stdout, f"history told in the repository:\n{r.stdout}{r.stderr}"


def test_test_modules_have_unique_basenames():
    """Test files have no package: pytest imports each by its basename, and two files of
    one name in different folders stop the whole suite's collection."""
    seen = {}
    for p in sorted((ROOT / "tests").rglob("*.py")):
        if p.name == "conftest.py" or "corpus" in p.parts:
            continue
        seen.setdefault(p.name, []).append(str(p.relative_to(ROOT)))
    assert not {n: ps for n, ps in seen.items() if len(ps) > 1}
