"""The command's edges: outputs kept apart from inputs, archive paths read as paths, each
archive file read once, counts that add up, ``seq`` checked, incremental runs that never
drop a transaction silently, checkpoints checked field by field."""

from __future__ import annotations

import hashlib
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pgoutput_codec import cli
from pgoutput_codec.data import sample_archive_path

SAMPLE = sample_archive_path()


def run(capsys, *args):
    """``pgoutput-codec args`` in this process: (exit status, stdout, stderr lines)."""
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, [ln for ln in err.splitlines() if ln.strip()]


def refused(capsys, *args, needle):
    code, out, err = run(capsys, *args)
    assert code == 1, (out, err)
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert needle in err[0], err[0]
    return err[0]


def digest(path):
    if os.path.isdir(path):
        return {n: digest(os.path.join(path, n)) for n in sorted(os.listdir(path))}
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ------------------------------------------------------------------------------ outputs apart from inputs
@pytest.fixture()
def arch(tmp_path):
    d = tmp_path / "arch"
    d.mkdir()
    shutil.copy(SAMPLE, d / "a.parquet")
    return d


def test_decode_refuses_to_write_over_its_archive_file(capsys, arch, tmp_path, monkeypatch):
    f = arch / "a.parquet"
    before = digest(arch)
    refused(capsys, "decode", f, f, needle="would be overwritten")
    monkeypatch.chdir(arch)                                  # a relative path naming the same file
    refused(capsys, "decode", "a.parquet", "./../arch/a.parquet", needle="would be overwritten")
    os.symlink(f, tmp_path / "link.parquet")                 # a symbolic link to it
    refused(capsys, "decode", f, tmp_path / "link.parquet", needle="would be overwritten")
    os.link(f, tmp_path / "hard.parquet")                    # a hard link to it
    refused(capsys, "decode", tmp_path / "hard.parquet", f, needle="would be overwritten")
    refused(capsys, "decode", f, tmp_path / "out.parquet", "--changes", "--checkpoint", f,
            needle="would be overwritten")
    assert digest(arch) == before
    assert not os.path.exists(tmp_path / "out.parquet")


def test_decode_refuses_an_output_inside_the_archive_directory(capsys, arch, tmp_path):
    before = digest(arch)
    refused(capsys, "decode", arch, arch, "--changes", needle="inside")          # OUT: the directory itself
    refused(capsys, "decode", arch, arch / "x.parquet", needle="inside")
    os.symlink(arch, tmp_path / "alias")
    refused(capsys, "decode", tmp_path / "alias", arch / "sub.parquet", needle="inside")
    refused(capsys, "decode", arch, tmp_path / "o.parquet", "--changes", "--checkpoint", arch / "cp.json",
            needle="inside")
    assert digest(arch) == before
    assert run(capsys, "decode", arch, tmp_path / "o.parquet")[0] == 0      # the archive still reads


def test_decode_refuses_a_checkpoint_that_is_its_output(capsys, arch, tmp_path):
    out = tmp_path / "o.parquet"
    refused(capsys, "decode", arch, out, "--changes", "--checkpoint", out, needle="same file")
    assert not out.exists()
    d = tmp_path / "outdir"
    d.mkdir()                # OUT a directory: the file written in it
    refused(capsys, "decode", arch, d, "--changes", "--checkpoint", d / "changes.parquet", needle="same file")
    assert os.listdir(d) == []


def test_transcode_refuses_to_write_over_its_archive(capsys, arch, tmp_path, monkeypatch):
    before = digest(arch)
    refused(capsys, "transcode", arch, arch, "--encoding", "LATIN1", needle="would be overwritten")
    refused(capsys, "transcode", arch, arch / "sub", "--encoding", "LATIN1", needle="inside")
    monkeypatch.chdir(arch)       # OUT a directory holding the archive file
    refused(capsys, "transcode", "a.parquet", ".", "--encoding", "LATIN1", needle="would be overwritten")
    assert digest(arch) == before


def test_transcode_keeps_the_layout_of_subdirectories(capsys, tmp_path):
    """Files of one name in two subdirectories: two files written, every row kept."""
    t = pq.read_table(SAMPLE).replace_schema_metadata(None)
    src = tmp_path / "arch"
    for i, sub in enumerate(("x", "y")):
        (src / sub).mkdir(parents=True)
        pq.write_table(t.slice(i * 1300, 1300), src / sub / "part.parquet")
    code, out, err = run(capsys, "transcode", src, tmp_path / "out", "--encoding", "LATIN1", "--errors", "keep")
    assert code == 0, err
    assert "rows: 2600 " in out and "files: 2 " in out, out
    for sub in ("x", "y"):
        assert pq.read_table(tmp_path / "out" / sub / "part.parquet").num_rows == 1300
    assert sorted(os.listdir(tmp_path / "out")) == ["x", "y"]
