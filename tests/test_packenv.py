"""The packed environment for Spark executors: unpacked elsewhere, with nothing on the
path, its Python imports pgoutput_codec and decodes as this process does."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

import pytest

from pgoutput_codec.cli import main
from pgoutput_codec.packenv import pack_environment

PROBE = """
import json, sys
import pyarrow.parquet as pq
import pgoutput_codec
from pgoutput_codec.batch import decode_batch
from pgoutput_codec.data import sample_archive_path
out = decode_batch(pq.read_table(sample_archive_path()).column("data"))
print(json.dumps({"package": pgoutput_codec.__file__, "prefix": sys.prefix, "rows": len(out),
                  "digest": out.to_string()[-200:]}))
"""


def test_an_unpacked_environment_decodes_with_nothing_installed(tmp_path, capsys):
    import json

    import pyarrow.parquet as pq

    from pgoutput_codec.batch import decode_batch
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
        assert any(n.endswith("/pgoutput_codec/_batch.pyx") for n in ours)
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
    assert b != a and not a.exists(), "the cache keeps only the archive of what is installed now"
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    with tarfile.open(b) as t:
        assert t.getmember("bin/python").linkname == f"/opt/python/bin/{ver}"
        assert "home = /opt/python/bin" in t.extractfile("pyvenv.cfg").read().decode()
        assert f"lib/{ver}/site-packages/pgoutput_codec/_decode.pyi" in t.getnames()


def test_what_cannot_be_packed_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"\.tar\.gz or \.tgz"):
        pack_environment(tmp_path / "env.zip", runtime=())
    with pytest.raises(ValueError, match="not installed"):
        pack_environment(tmp_path / "env.tgz", runtime=("no-such-distribution-here",))
    assert not list(tmp_path.iterdir())
    assert main(["pack", "-o", str(tmp_path / "env.tar")]) == 1
