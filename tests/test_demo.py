"""``make demo``: the whole story on a real server (capture in two runs, the second
resuming), decoded locally (fast) and on Spark (slow), every rebuilt table checked
against the server's ``SELECT *``; and the check itself can fail."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import re
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from pgoutput_codec import demo
from pgoutput_codec.cli import read_archive_parts
from pgoutput_codec.testing import pgserver

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _need_server():
    try:
        pgserver.first_available()
    except RuntimeError as e:
        pytest.skip(str(e))


def test_compare_tables_catches_differences():
    t = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    server = [{"id": 1, "n": decimal.Decimal("1.50"), "at": t, "j": {"a": 1}, "l": ["x"]}]
    same = [{"id": 1, "n": decimal.Decimal("1.5"), "at": t, "j": '{"a": 1}', "l": ["x"], "n__special": None}]
    assert demo.compare_tables(server, same, ["id"]) == []
    assert demo.compare_tables(server, [dict(same[0], n=decimal.Decimal("1.51"))], ["id"])
    assert demo.compare_tables(server, [dict(same[0], at=t.replace(tzinfo=None))], ["id"])   # naive != aware
    assert demo.compare_tables(server, [dict(same[0], j='{"a": 2}')], ["id"])
    assert demo.compare_tables(server, [dict(same[0], n="1.50")], ["id"])          # text is not numeric
    assert demo.compare_tables(server, [], ["id"])
    assert demo.compare_tables(server, same + [dict(same[0], id=2)], ["id"])


def test_demo_local(tmp_path):
    _need_server()
    res = demo.run(str(tmp_path), local=True, log=lambda *a: None)
    assert res["ok"], res
    assert res["changes"] == 2443     # with a Truncate opening each of the four copied tables
    assert res["copied"] == 52       # the rows that were there before the slot: 20 + 30 + 2
    parts = read_archive_parts(res["archive"])
    assert len(parts) >= 3
    seqs = [s for p in parts for s in pq.read_table(p.path).column("seq").to_pylist()]
    assert seqs == list(range(len(seqs)))
    assert os.path.getsize(res["plot"]) > 10_000


@pytest.mark.slow
def test_demo_spark_end_to_end(tmp_path):
    """``python -m pgoutput_codec.demo`` as ``make demo`` runs it (Spark decoding)."""
    _need_server()
    pytest.importorskip("pyspark")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("no Java runtime")
    if not demo.spark_changes_available():
        pytest.skip("pgoutput_codec.spark.changes not available: the demo would decode locally")
    res = subprocess.run([sys.executable, "-m", "pgoutput_codec.demo", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT, SPARK_LOCAL_IP="127.0.0.1"))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    # a quiet front door: no Python warning reaches the newcomer (PySpark warns of pandas 3)
    assert not re.search(r"\w+Warning: ", res.stderr), res.stderr[-3000:]
    assert "decoding on Spark" in res.stdout
    assert res.stdout.count("OK: equals the server's SELECT *") == 8      # rebuilt, and the Delta copies
    assert res.stdout.count("Delta copy OK") == 4
    assert os.path.exists(tmp_path / "changes.png")
