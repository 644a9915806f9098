"""mirror's target: runs into one target at the same time apply each batch once; a Delta
table there the mirror did not write is refused, not merged into; a checkpoint file of
another shape is set aside with a warning and the archive read from its start. Over
real-server archives of the corpus (tests/data)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")

from change_cases import archive  # noqa: E402
from test_mirror import check_copies  # noqa: E402

from pgoutput_codec import decode_changes, mirror  # noqa: E402
from pgoutput_codec.lake import read_copy, table_path  # noqa: E402
from pgoutput_codec.lake.mirror import CHECKPOINT, LSN_KEY  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=ROOT)


def _landed(tmp_path, arc, cuts, name="archive"):
    """An archive directory holding ``arc`` cut at ``cuts``, one file per piece."""
    src = tmp_path / name
    src.mkdir(exist_ok=True)
    for k, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(arc)], strict=True)):
        pq.write_table(arc.slice(a, b - a), src / f"part-{k:03d}.parquet")
    return src


def _copies(target) -> dict:
    return {d: deltalake.DeltaTable(os.path.join(target, d)) for d in sorted(os.listdir(target))
            if os.path.isdir(os.path.join(target, d))}


def _reached(dt) -> list[int]:
    """The commit LSNs a copy's commits reached, oldest version first."""
    return [int(h[LSN_KEY]) for h in sorted(dt.history(), key=lambda h: h["version"]) if LSN_KEY in h]


def test_concurrent_runs_into_one_target_apply_each_batch_once(tmp_path):
    """Six command-line runs at once into one target, over half an archive and then over
    all of it: every run ends 0, the copies are the snapshot, and each copy's commits
    are those of one run alone (the same commit LSNs, none twice: truncates too)."""
    arc = archive("16.14", "v3_2pc_binary_streaming")
    half = len(arc) // 2
    alone = tmp_path / "alone"
    mirror(str(_landed(tmp_path, arc.slice(0, half), [half // 2], "a")), alone)
    mirror(str(_landed(tmp_path, arc, [half // 2, half], "a")), alone)
    src, target = tmp_path / "archive", tmp_path / "lake"
    for cuts in ([half // 2], [half // 2, half]):
        _landed(tmp_path, arc.slice(0, half) if len(cuts) == 1 else arc, cuts)
        procs = [subprocess.Popen([sys.executable, "-m", "pgoutput_codec.cli", "mirror", str(src), str(target)],
                                  env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for _ in range(6)]
        errs = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
        assert all(rc == 0 for rc, _ in errs), errs
    assert check_copies(target, decode_changes(arc)) > 5
    want = {d: _reached(dt) for d, dt in _copies(alone).items()}
    assert {d: _reached(dt) for d, dt in _copies(target).items()} == want
    assert any(len(v) > 1 for v in want.values())


def test_a_delta_table_the_mirror_did_not_write_is_refused(tmp_path, monkeypatch):
    """A Delta table of other rows where a copy would be: the run refuses it by name and
    path before writing anything, and leaves it as it was; the command line says so in
    one line, exit 1. A copy holding its creation alone (the mirror's table metadata, no
    batch yet) is its own, and the next run fills it."""
    from deltalake import write_deltalake

    from pgoutput_codec.cli import main
    arc = archive("16.14", "v1_text")
    target = tmp_path / "lake"
    foreign = table_path(target, "public.rid_default")
    write_deltalake(foreign, pa.table({"id": [1, 2], "v": ["mine", "too"]}))
    with pytest.raises(ValueError, match=r"public\.rid_default: .*rid_default is a Delta table the mirror did not "
                                         r"write"):
        mirror(arc, target)
    assert [d for d in os.listdir(target) if not d.startswith(".")] == ["public.rid_default"]
    assert read_copy(foreign).sort_by("id").to_pylist() == [{"id": 1, "v": "mine"}, {"id": 2, "v": "too"}]
    assert deltalake.DeltaTable(foreign).version() == 0
    src = _landed(tmp_path, arc, [])
    err_lines = []
    monkeypatch.setattr(sys, "stderr", type("E", (), {"write": lambda self, s: err_lines.append(s),
                                                      "flush": lambda self: None})())
    assert main(["mirror", str(src), str(target)]) == 1
    text = "".join(err_lines).strip()
    assert len(text.splitlines()) == 1 and "did not write" in text, text
    monkeypatch.undo()
    # a copy of the mirror's, in the copy's columns and with its creation's metadata alone
    import importlib

    from deltalake import CommitProperties
    m = importlib.import_module("pgoutput_codec.lake.mirror")
    mirror(arc, tmp_path / "scratch", tables="public.rid_default")
    made = deltalake.DeltaTable(table_path(tmp_path / "scratch", "public.rid_default"))
    target = tmp_path / "lake2"
    write_deltalake(table_path(target, "public.rid_default"), pa.schema(made.schema().to_arrow()).empty_table(),
                    configuration=made.metadata().configuration,
                    commit_properties=CommitProperties(custom_metadata={m.TABLE_KEY: "public.rid_default"}))
    assert deltalake.DeltaTable(table_path(target, "public.rid_default")).transaction_version(m.APP_ID) is None
    mirror(arc, target)
    assert check_copies(target, decode_changes(arc)) > 5


@pytest.mark.parametrize("tampered", ["[]", '{"a": 1}', '{"checkpoint": 5, "tables": null, "copies": "x"}',
                                      '{"checkpoint": "{}", "tables": null, "copies": []}', '"a string"',
                                      "{not json", "", "\x00\xff"])
def test_a_tampered_checkpoint_is_set_aside_with_a_warning(tmp_path, tampered):
    """A checkpoint file of another shape (a list, a dict of other keys or values, a
    string, not JSON): the run warns, reads the archive from its start and leaves the
    copies a clean run would; the command line says so in a warning line and ends 0."""
    arc = archive("16.14", "v1_text")
    src = _landed(tmp_path, arc.slice(0, 300), [150])
    target = tmp_path / "lake"
    mirror(str(src), target)
    _landed(tmp_path, arc, [150, 300])
    with open(target / CHECKPOINT, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(tampered)
    with pytest.warns(UserWarning, match="not a mirror checkpoint"):
        mirror(str(src), target)
    assert check_copies(target, decode_changes(arc)) > 5
    json.loads((target / CHECKPOINT).read_text())        # a checkpoint again
    (target / CHECKPOINT).write_text(tampered)
    proc = subprocess.run([sys.executable, "-m", "pgoutput_codec.cli", "mirror", str(src), str(target)],
                          env=ENV, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "pgoutput-codec mirror: warning:" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_apply_batch_applies_a_batch_the_copy_holds_no_more(tmp_path):
    """lake.apply_batch (the writer Spark's mirror shares) given a batch the copy holds
    already writes nothing; one that overlaps what it holds is refused by name."""
    from pgoutput_codec import net_changes
    from pgoutput_codec.lake import apply_batch, held_lsn
    changes = decode_changes(archive("16.14", "v3_2pc_binary_streaming"))
    target = tmp_path / "lake"
    name = "public.trunc_parent"
    net = net_changes(changes, name)
    assert "truncate" in net.column("__OP").to_pylist()
    first = apply_batch(target, name, net, [])
    assert first.version is not None and held_lsn(target, name) == first.commit_lsn
    again = apply_batch(target, name, net, [])
    assert again.version is None and again.commit_lsn == first.commit_lsn
    assert deltalake.DeltaTable(table_path(target, name)).version() == first.version
    with pytest.raises(ValueError, match=r"public\.trunc_parent: the batch holds commits"):
        _overlap(target, name, net, first.commit_lsn)
    assert deltalake.DeltaTable(table_path(target, name)).version() == first.version


def _overlap(target, name, net, held):
    """``net`` with a later commit added, so that it spans the copy's held LSN."""
    from pgoutput_codec.lake import apply_batch
    j = net.column_names.index("__COMMIT_LSN")
    later = net.slice(len(net) - 1)
    later = later.set_column(j, "__COMMIT_LSN", pa.array([held + 1], later.schema.field(j).type))
    return apply_batch(target, name, pa.concat_tables([net, later]), [])
