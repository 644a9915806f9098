"""The packed environment for Spark executors: unpacked elsewhere, with nothing on the
path, its Python imports pgoutput_codec and decodes as this process does."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from pgoutput_codec.cli import main
from pgoutput_codec.packenv import pack_environment

PROBE = """
import json, sys
import pyarrow.parquet as pq
import pgoutput_codec
from pgoutput_codec.pgoutput.batch import decode_batch
from pgoutput_codec.data import sample_archive_path
out = decode_batch(pq.read_table(sample_archive_path()).column("data"))
print(json.dumps({"package": pgoutput_codec.__file__, "prefix": sys.prefix, "rows": len(out),
                  "digest": out.to_string()[-200:]}))
"""


def test_an_unpacked_environment_decodes_with_nothing_installed(tmp_path, capsys):
    import json

    import pyarrow.parquet as pq

    from pgoutput_codec.pgoutput.batch import decode_batch
    from pgoutput_codec.data import sample_archive_path

    archive = tmp_path / "env.tar.gz"
    assert main(["pack", "-o", str(archive)]) == 0
    assert f"{archive}#environment" in capsys.readouterr().out
    env = tmp_path / "unpacked" / "environment"
    env.mkdir(parents=True)
    # the shell's tar, as Spark unpacks a .tar.gz
    subprocess.run(["tar", "xzf", str(archive), "-C", str(env)], check=True)
    with tarfile.open(archive) as t:
        ours = [n for n in t.getnames() if "/site-packages/pgoutput_codec/" in n]
        assert ours and not any(n.endswith((".c", ".pyc")) for n in ours)
        assert any(n.endswith("/pgoutput_codec/pgoutput/_batch.pyx") for n in ours)
    clean = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run([str(env / "bin" / "python"), "-c", PROBE], env=clean, cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["package"].startswith(str(env / "lib") + os.sep)
    assert got["prefix"] == str(env)
    want = decode_batch(pq.read_table(sample_archive_path()).column("data"))
    assert got["rows"] == len(want) and got["digest"] == want.to_string()[-200:]


def test_an_archive_is_reused_until_its_contents_change(tmp_path):
    # runtime=(): the package alone, enough to see the cache at work
    a = pack_environment(cache_dir=tmp_path, runtime=())
    mtime = a.stat().st_mtime_ns
    assert pack_environment(cache_dir=tmp_path, runtime=()) == a and a.stat().st_mtime_ns == mtime
    b = pack_environment(cache_dir=tmp_path, runtime=(), python_prefix="/opt/python")
    assert b != a and a.exists(), "executors of a running application may still fetch the first"
    assert pack_environment(cache_dir=tmp_path, runtime=()) == a and a.stat().st_mtime_ns == mtime
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    with tarfile.open(b) as t:
        assert t.getmember("bin/python").linkname == f"/opt/python/bin/{ver}"
        assert "home = /opt/python/bin" in t.extractfile("pyvenv.cfg").read().decode()
        assert f"lib/{ver}/site-packages/pgoutput_codec/pgoutput/_decode.pyi" in t.getnames()


def test_what_cannot_be_packed_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"\.tar\.gz or \.tgz"):
        pack_environment(tmp_path / "env.zip", runtime=())
    with pytest.raises(ValueError, match="not installed"):
        pack_environment(tmp_path / "env.tgz", runtime=("no-such-distribution-here",))
    assert not list(tmp_path.iterdir())
    assert main(["pack", "-o", str(tmp_path / "env.tar")]) == 1


def _package_copy(tmp_path):
    """A copy of the package's tree (generated C and bytecode left out), for a process
    that imports pgoutput_codec from it: edits to it do not touch the checkout."""
    import shutil

    import pgoutput_codec

    root = tmp_path / "src"
    shutil.copytree(os.path.dirname(pgoutput_codec.__file__), root / "pgoutput_codec",
                    ignore=shutil.ignore_patterns("*.c", "__pycache__"))
    return root / "pgoutput_codec"


def _pack_from(copy, cache, **options):
    """``pack_environment(cache_dir=cache, runtime=(), **options)`` in a process that
    imports the package from ``copy``: the archive's path."""
    code = ("import sys\nfrom pgoutput_codec.packenv import pack_environment\n"
            f"print(pack_environment(cache_dir={str(cache)!r}, runtime=(), **{options!r}))\n")
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(copy.parent)},
                       cwd=copy.parent, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.strip())


def _member(archive, name):
    with tarfile.open(archive) as t:
        ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
        return t.extractfile(f"lib/{ver}/site-packages/pgoutput_codec/{name}").read()


def test_an_edit_of_the_same_size_and_time_is_a_new_archive(tmp_path):
    """The cache is keyed by the files' contents: an edit that keeps a file's size and
    modification time (an editor or a checkout restoring it) still makes a new archive."""
    copy, cache = _package_copy(tmp_path), tmp_path / "cache"
    a = _pack_from(copy, cache)
    f = copy / "errors.py"
    st = f.stat()
    text = f.read_bytes()
    edited = text.replace(b"error", b"ERROR", 1)
    assert edited != text and len(edited) == len(text)
    f.write_bytes(edited)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    b = _pack_from(copy, cache)
    assert b != a
    assert _member(b, "errors.py") == edited
    assert not a.exists(), "the archive of the same interpreter before the edit is stale"


def test_hidden_files_of_the_package_tree_are_left_out(tmp_path):
    """A dot-file (``.env`` with a key) or a dot-directory (``.ipynb_checkpoints``) inside
    the package's directory is nothing the package imports: it stays out of the archive."""
    copy = _package_copy(tmp_path)
    (copy / ".env").write_text("API_KEY=secret\n")
    (copy / ".ipynb_checkpoints").mkdir()
    (copy / ".ipynb_checkpoints" / "demo-checkpoint.py").write_text("x = 1\n")
    (copy / "spark" / ".hidden.py").write_text("x = 1\n")
    with tarfile.open(_pack_from(copy, tmp_path / "cache")) as t:
        names = t.getnames()
    assert any(n.endswith("/pgoutput_codec/errors.py") for n in names)
    hidden = [n for n in names if "/pgoutput_codec/" in n and any(
        part.startswith(".") for part in n.split("/pgoutput_codec/", 1)[1].split("/"))]
    assert hidden == []


def test_an_archive_is_created_with_the_process_umask(tmp_path):
    """As any file this process writes: umask 077 gives an archive only its owner reads."""
    old = os.umask(0o077)
    try:
        named = pack_environment(tmp_path / "env.tar.gz", runtime=())
        cached = pack_environment(cache_dir=tmp_path / "cache", runtime=())
    finally:
        os.umask(old)
    assert oct(named.stat().st_mode & 0o777) == oct(0o600)
    assert oct(cached.stat().st_mode & 0o777) == oct(0o600)
    old = os.umask(0o022)
    try:
        named = pack_environment(tmp_path / "env2.tar.gz", runtime=())
    finally:
        os.umask(old)
    assert oct(named.stat().st_mode & 0o777) == oct(0o644)
