"""A process that mirrored and read copies back ends with status 0, also on a loaded
machine: no read of a copy leaves work to Arrow's IO threads that could outlive the
interpreter (``terminate called without an active exception``, status 134, the way
``DeltaTable.to_pyarrow_table()`` can end a process). The command line and a script of
``pgoutput_codec.mirror`` plus ``lake.read_copy`` are each run many times as
subprocesses, with a busy process per core beside them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq
import pytest

pytest.importorskip("deltalake")

from change_cases import archive  # noqa: E402

from pgoutput_codec import mirror  # noqa: E402

#: runs of each kind: a process aborted so about once in ten to twenty runs on a loaded
#: machine when a copy's read went through Python file objects
RUNS = 16
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import os, sys
    from pgoutput_codec import mirror
    from pgoutput_codec.lake import read_copy, table_path
    source, target = sys.argv[1], sys.argv[2]
    runs = mirror(source, target)
    rows = sum(len(read_copy(table_path(target, r.table))) for r in runs)
    print(len(runs), rows)
""")


@pytest.fixture
def load():
    """A busy process per core, for the length of the test."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    yield
    for p in procs:
        p.kill()
        p.wait()


def test_mirror_processes_exit_cleanly_under_load(tmp_path, load):
    arc = archive("16.14", "v3_2pc_binary_streaming")
    half, whole = tmp_path / "half", tmp_path / "whole"
    half.mkdir()
    whole.mkdir()
    pq.write_table(arc.slice(0, len(arc) // 2), half / "a.parquet")
    pq.write_table(arc.slice(0, len(arc) // 2), whole / "a.parquet")
    pq.write_table(arc.slice(len(arc) // 2), whole / "b.parquet")
    template = tmp_path / "template"
    mirror(str(half), template)     # copies with files: the next run reads some back to merge
    env = dict(os.environ, PYTHONPATH=ROOT)
    script = tmp_path / "mirror_and_read.py"
    script.write_text(SCRIPT)
    outcomes = []
    for i in range(RUNS):
        for kind, cmd in (("cli", [sys.executable, "-m", "pgoutput_codec.cli", "mirror"]),
                          ("script", [sys.executable, str(script)])):
            target = tmp_path / f"{kind}-{i}"
            shutil.copytree(template, target)
            p = subprocess.run([*cmd, str(whole), str(target)], env=env, capture_output=True, text=True,
                               timeout=120)
            outcomes.append((kind, i, p.returncode, p.stderr))
            shutil.rmtree(target)
    bad = [(k, i, rc, err[-300:]) for k, i, rc, err in outcomes if rc != 0 or "terminate called" in err]
    assert not bad, f"{len(bad)} of {len(outcomes)} runs: {bad}"
