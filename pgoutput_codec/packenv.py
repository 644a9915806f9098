"""A packed Python environment holding pgoutput_codec, for machines that do not have it.

Spark unpacks an archive named in ``spark.archives`` (or added as a session artifact on
Spark Connect) in each executor's working directory; the executors' Python then runs
from it (:func:`pgoutput_codec.spark.ship`). Compiled extensions cannot be imported from
a zip on ``sys.path`` (``spark.submit.pyFiles``), so the archive is a virtual environment
as files, the layout ``python -m venv`` makes and ``venv-pack`` packs:

- ``bin/python``: a link to an interpreter of the same version (the driver's own, or the
  one under ``python_prefix`` on the cluster's nodes), and ``pyvenv.cfg`` beside it, which
  makes that interpreter take ``lib/pythonX.Y/site-packages`` as its own;
- in site-packages, the files of pgoutput_codec as this process imports it (compiled
  extensions included, generated C left out) and of the distributions it needs on the
  executors (pyarrow, numpy, pandas for Spark's Arrow workers, and what they require),
  copied from this process's environment: the same versions as the driver, and no
  package index needed.

The interpreter itself is not in the archive (neither venv-pack nor PEX carry one): the
nodes need CPython of the same minor version, at the path the link names. The archive's
name is a digest of everything in it (the files' contents, not their times), so a second
call finds the first's file.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import importlib.util
import io
import os
import re
import secrets
import sys
import tarfile
from pathlib import Path

__all__ = ["ENV_NAME", "RUNTIME", "WHEN_INSTALLED", "pack_environment", "default_cache"]

#: the directory an archive unpacks to on the executors (``archive#ENV_NAME``)
ENV_NAME = "environment"
#: what the executors import besides pgoutput_codec: its dependencies, and pandas, which
#: PySpark's Arrow workers import
RUNTIME = ("pyarrow", "numpy", "pandas")
#: carried as well when installed here: what Spark's executors write the mirror's Delta
#: copies with (``spark.mirror``)
WHEN_INSTALLED = ("deltalake",)
#: files of the package's source tree that are not needed to run it
_LEFT_OUT = re.compile(r"(\.c|\.cpp|\.o|\.pyc)$")
#: the name of the archives kept in the cache, before their digest
_CACHED = "pgoutput_codec-env-"
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def default_cache() -> Path:
    """Where archives are kept: ``$XDG_CACHE_HOME/pgoutput_codec`` (``~/.cache/...``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pgoutput_codec"


def _package_files():
    """(path, name in the archive) of every file of the imported pgoutput_codec."""
    spec = importlib.util.find_spec("pgoutput_codec")
    root = Path(next(iter(spec.submodule_search_locations)))
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        # dot-files and dot-directories (.env, .ipynb_checkpoints) are nothing the package
        # imports, and may hold what must not travel
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for name in sorted(filenames):
            if not _LEFT_OUT.search(name) and not name.startswith("."):
                p = Path(dirpath) / name
                out.append((p, Path("pgoutput_codec") / p.relative_to(root)))
    return out


def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def _distributions(names):
    """The installed distributions ``names`` and, transitively, what they require (extras
    left out; a requirement not installed here is not needed here either)."""
    seen, todo, out = set(), list(names), []
    while todo:
        name = todo.pop(0)
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if name in names:
                raise ValueError(f"{name} is not installed here: it cannot be packed") from None
            continue
        out.append(dist)
        for req in dist.requires or ():
            if "extra ==" not in req and "extra==" not in req:
                m = _NAME.match(req)
                if m:
                    todo.append(m.group(1))
    return out


def _dist_files(dist):
    """(path, name in site-packages) of a distribution's files (its RECORD), leaving out
    what pip put outside site-packages (scripts) and compiled bytecode."""
    out = []
    for f in dist.files or ():
        if f.parts and f.parts[0] == "..":
            continue
        if f.suffix == ".pyc":
            continue
        p = Path(dist.locate_file(f))
        if p.is_file():
            out.append((p, Path(f)))
    return out


def _content_digest(head: str, files) -> str:
    """sha256 of ``head`` and each file's name, size and bytes: a small part of packing
    the environment; a key of sizes and times misses an edit that keeps both."""
    digest = hashlib.sha256(head.encode())
    for p, name in files:
        with open(p, "rb") as f:
            digest.update(f"{name}\0{os.fstat(f.fileno()).st_size}\0".encode())
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def _new_file(directory: Path, name: str):
    """A new file (descriptor, path) beside ``name`` in ``directory``, created with the
    process's umask as any file it writes (``mkstemp`` forces 0600)."""
    while True:
        path = directory / f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), path
        except FileExistsError:
            continue


def _interpreter(python_prefix):
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    if python_prefix:
        return str(Path(python_prefix) / "bin" / ver), ver
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base), ver


def pack_environment(out=None, *, python_prefix=None, runtime=None, cache_dir=None) -> Path:
    """The path of an archive of an environment that imports pgoutput_codec: built, or
    found from an earlier call.

    ``out``: the archive to write (``.tar.gz`` or ``.tgz``: Spark unpacks a plain ``.tar``
    with its own reader, which refuses the link to the interpreter); default: a file
    named by the interpreter and ``runtime`` it is for and by the contents' digest, in
    ``cache_dir`` (default :func:`default_cache`). One archive is kept there per
    interpreter and runtime: a new one replaces only the archive of the same ones
    (the others stay, for executors of running applications that fetch them).
    ``python_prefix``: the cluster nodes' Python (``/usr`` for ``/usr/bin/python3.11``);
    default: this process's base interpreter, for nodes set up like this machine.
    ``runtime``: the distributions to carry besides pgoutput_codec (default:
    :data:`RUNTIME`, and those of :data:`WHEN_INSTALLED` installed here).
    """
    if runtime is None:
        runtime = RUNTIME + tuple(n for n in WHEN_INSTALLED if _installed(n))
    python, ver = _interpreter(python_prefix)
    files = [(p, Path("lib") / ver / "site-packages" / n) for p, n in _package_files()]
    for dist in _distributions(runtime):
        files += [(p, Path("lib") / ver / "site-packages" / n) for p, n in _dist_files(dist)]
    kind = f"{python}\n{sys.version}\n{' '.join(sorted(runtime))}\n"
    cached = out is None
    if cached:
        # the archives of one interpreter and runtime: the newest replaces the others
        family = _CACHED + hashlib.sha256(kind.encode()).hexdigest()[:8] + "-"
        out = Path(cache_dir or default_cache()) / f"{family}{_content_digest(kind, files)[:16]}.tar.gz"
        if out.exists():
            return out
    out = Path(out)
    if not out.name.endswith((".tar.gz", ".tgz")):
        raise ValueError(f"{out}: an environment archive is .tar.gz or .tgz")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_file(out.parent, out.name)
    try:
        # gzip level 1: 3.5 s and 102 MB here, against 8.1 s and 89 MB at level 6
        with os.fdopen(fd, "wb") as f, tarfile.open(fileobj=f, mode="w:gz", compresslevel=1) as tar:
            _add_link(tar, "bin/python", python)
            for alias in ("python3", ver):
                _add_link(tar, f"bin/{alias}", "python")
            cfg = (f"home = {os.path.dirname(python)}\ninclude-system-site-packages = false\n"
                   f"version = {sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}\n")
            _add_bytes(tar, "pyvenv.cfg", cfg.encode())
            for p, name in files:
                tar.add(p, arcname=str(name), recursive=False)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    if cached:   # the same interpreter's archives of what was installed before
        for old in out.parent.glob(f"{family}*.tar.gz"):
            if old != out:
                old.unlink(missing_ok=True)
    return out


def _add_link(tar, name, target):
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    info.mode = 0o777
    tar.addfile(info)


def _add_bytes(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))
