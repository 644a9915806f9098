"""pgoutput_codec.spark.write_snapshots: every table's snapshot (history, net changes) of a
change DataFrame written in one pass, each by the executor holding the table's change rows.
Every table's files read back equal the one-process table of every table's rows, over
tables dropped, created again, renamed and swapped and over a real-server archive, in
Parquet and in Delta (read back by deltalake); a table's directory is replaced whole; the
number of Spark jobs does not grow with the number of tables."""

from __future__ import annotations

import os
import uuid
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

import table_moves as TM  # noqa: E402  (tests/ is on sys.path: conftest)
from change_cases import enc, same_values  # noqa: E402
from change_corpus import TC, VERSION, write_files  # noqa: E402

from pgoutput_codec import decode_changes as decode_changes_1  # noqa: E402
from pgoutput_codec.lake.names import dir_name  # noqa: E402
from pgoutput_codec.spark import decode_changes, write_snapshots  # noqa: E402
from pgoutput_codec.spark.shipping import is_connect  # noqa: E402
from pgoutput_codec.spark.snapshots import (OWN_COLUMNS, PARQUET_FILE, TableWriter, as_written,  # noqa: E402
                                            write_tables)
from pgoutput_codec.tables import IncompleteTableWarning, history, net_changes, snapshot  # noqa: E402
from pgoutput_codec.tables.rows import split_tables  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

ONE = {"snapshot": snapshot, "history": history, "net_changes": net_changes}
try:
    import deltalake  # noqa: F401
    NO_DELTA = False
except ImportError:   # the PySpark 3.5 lane's environment
    NO_DELTA = True
#: the same code on the executors as in another parameter: left out of the Connect and 3.5 lanes
SHARED = [pytest.mark.same_code_on_connect, pytest.mark.same_code_on_spark35]
#: both formats; Delta where deltalake is installed
FORMAT = ["parquet", pytest.param("delta", marks=[*SHARED, pytest.mark.on_cluster,
                                                  pytest.mark.skipif(NO_DELTA, reason="deltalake is not installed")])]


def _moves_archive() -> pa.Table:
    """Every scenario of table_moves in one archive, each under names of its own
    (``s<k>_t_moves``…): tables dropped and created again, renamed, swapped, renamed away."""
    msgs = []
    for k, name in enumerate(sorted(TM.SCENARIOS)):
        def own(t, k=k):
            return f"s{k}_{t}"
        steps = []
        for s in TM.SCENARIOS[name]:
            if s[0] == "rename":
                steps.append(("rename", *[(own(a), own(b)) for a, b in s[1:]]))
            else:
                steps.append((s[0], own(s[1]), *s[2:]))
        msgs += TM.messages(steps, first_relation_id=16500 + 10000 * k, xid=900 + 1000 * k,
                            lsn=100 + 1_000_000 * k)[0]
    data = enc(msgs)
    return pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})


def _sorted(t: pa.Table) -> pa.Table:
    orderable = [f.name for f in t.schema if not (pa.types.is_nested(f.type) or pa.types.is_dictionary(f.type))]
    return t.sort_by([(c, "ascending") for c in orderable]) if orderable and len(t) else t


def _read(path, format) -> pa.Table:
    if format == "delta":
        from pgoutput_codec.lake import read_copy
        return read_copy(path)
    return pq.read_table(os.path.join(path, PARQUET_FILE))


def _same(got: pa.Table, want: pa.Table, what):
    got, want = _sorted(got), _sorted(want)
    assert got.column_names == want.column_names, what
    assert len(got) == len(want), what
    for c in want.column_names:
        x, y = got.column(c), want.column(c)
        if x.type != y.type:   # a type of unknown OID sent in binary: its bytes as a string on Spark
            assert (x.type, y.type) == (pa.string(), pa.binary()), (what, c)
            y = y.cast(pa.string())
        assert same_values(x, y), (what, c)


def _check(written, changes_1: pa.Table, path, what="snapshot", format="parquet", registry=None, **kw):
    """Each table written is the one-process ``what`` of every table's rows, in its own
    directory under ``path``; no other directory is there."""
    for w in written:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IncompleteTableWarning)
            want = ONE[what](changes_1, w.table, registry=registry, **kw)
        if want.num_columns == len(OWN_COLUMNS[what]):    # the name bears no table at the end: no directory
            assert w.path is None and w.rows == 0, w
            continue
        assert w.path == os.path.join(str(path), dir_name(w.table)), w
        assert w.rows == len(want), w
        _same(_read(w.path, format), as_written(want), (what, w.table))
    held = sorted(e for e in os.listdir(path) if not e.startswith("."))
    assert held == sorted(dir_name(w.table) for w in written if w.path is not None)


@pytest.fixture(scope="module")
def moves_archive():
    return _moves_archive()


@pytest.fixture(scope="module")
def moves(spark, moves_archive, tmp_path_factory):
    files = write_files(moves_archive, tmp_path_factory.mktemp("moves"), 3)
    return (decode_changes(spark.read.parquet(*files), order_by="seq", lsn=None),
            decode_changes_1(moves_archive["data"]))


@pytest.mark.parametrize("what", [pytest.param("snapshot", marks=pytest.mark.on_cluster),
                                  pytest.param("history", marks=SHARED),
                                  pytest.param("net_changes", marks=SHARED)])
def test_each_table_written_is_the_one_process_table(spark, moves, tmp_path, what):
    changes, changes_1 = moves
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = write_snapshots(changes, tmp_path / "out", what=what)
    names = {w.table for w in written}
    assert names == set(split_tables(changes_1)) and len(names) >= 8
    _check(written, changes_1, tmp_path / "out", what)
    # the executors' warnings raised again here, one per table whose start is unknown
    said = [w for w in caught if issubclass(w.category, IncompleteTableWarning)]
    assert said and {w.message.table for w in said} <= names
    assert {w.filename for w in said} == {__file__}     # raised at the call
    assert write_tables(changes_1, tmp_path / "one", what=what) == [
        w._replace(path=w.path and w.path.replace(str(tmp_path / "out"), str(tmp_path / "one"))) for w in written]


def test_as_of_lsn_and_patterns_select(spark, moves, tmp_path):
    changes, changes_1 = moves
    cut = 2_000_000
    written = write_snapshots(changes, tmp_path, tables="public.s1_*,public.s3_t_moves", as_of_lsn=cut)
    assert {w.table for w in written} == {n for n in split_tables(changes_1)
                                          if n.startswith("public.s1_") or n == "public.s3_t_moves"}
    _check(written, changes_1, tmp_path, as_of_lsn=cut)
    assert write_snapshots(changes, tmp_path / "none", tables="nothing.*") == []


@pytest.mark.parametrize("format", FORMAT)
def test_written_again_the_same_single_copy(spark, moves, tmp_path, format):
    changes, changes_1 = moves
    first = write_snapshots(changes, tmp_path, format=format)
    before = {w.table: _read(w.path, format) for w in first if w.path}
    # what a killed run leaves: a table half written beside its directory, one moved away
    d = dir_name(first[0].table)
    for stale in (f".{d}~scratch~0123456789ab~feedbeef", f".{d}~old~0123456789ab~feedbeef"):
        os.makedirs(tmp_path / stale / "_delta_log")
    again = write_snapshots(changes, tmp_path, format=format)
    assert again == first
    _check(again, changes_1, tmp_path, format=format)
    for w in again:
        if w.path:
            assert _read(w.path, format).equals(before[w.table]), w.table
            if format == "delta":    # one version: the table written afresh, no history of runs
                assert len(os.listdir(os.path.join(w.path, "_delta_log"))) == 1, w.table
            else:
                assert os.listdir(w.path) == [PARQUET_FILE], w.table
    assert not [e for e in os.listdir(tmp_path) if e.startswith(".") and "~" in e]


def test_a_table_written_twice_by_its_body_leaves_one_copy(moves_archive, tmp_path):
    """What a task run again does (a retry, a speculative copy): the executor's body over
    the same group twice; a directory of the table held before is replaced whole."""
    groups = split_tables(decode_changes_1(moves_archive["data"]))
    name = "public.s0_t_moves"
    os.makedirs(tmp_path / dir_name(name))
    (tmp_path / dir_name(name) / "part-old.parquet").write_bytes(b"an older copy")
    body = TableWriter(str(tmp_path), uuid.uuid4().hex[:12])
    rows = [r for _ in range(2) for b in body(name, groups[name]) for r in b.to_pylist()]
    assert rows[0] == rows[1] and rows[0]["path"] == str(tmp_path / dir_name(name))
    assert os.listdir(tmp_path) == [dir_name(name)]
    assert os.listdir(tmp_path / dir_name(name)) == [PARQUET_FILE]


@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
@pytest.mark.skipif(NO_DELTA, reason="deltalake is not installed")
def test_real_server_tables_in_delta(spark, files, tmp_path):
    option_set = "v3_2pc_binary_streaming"
    reg = TC.registry_for(VERSION)
    changes = decode_changes(spark.read.parquet(*files[option_set]), order_by="seq", registry=reg)
    changes_1 = decode_changes_1(TC.archive(VERSION, option_set), registry=reg)
    written = write_snapshots(changes, tmp_path, format="delta", registry=reg)
    assert len(written) >= 10 and sum(w.rows for w in written) > 50
    _check(written, changes_1, tmp_path, format="delta", registry=reg)


def test_spark_jobs_do_not_grow_with_the_tables(spark, tmp_path):
    if is_connect(spark):
        pytest.skip("Spark Connect has no status tracker of the client's jobs")
    steps = [s for k in range(40) for s in (("create", f"t{k}"), ("insert", f"t{k}", (k, "a"), (k + 1, "b")))]
    data = enc(TM.messages(steps)[0])
    t = pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})
    changes = decode_changes(spark.read.parquet(*write_files(t, tmp_path / "archive", 2)), order_by="seq",
                             lsn=None).cache()
    changes.count()
    sc = spark.sparkContext
    jobs = {}
    for n, tables in ((2, "public.t0,public.t1"), (40, None)):
        group = f"write-snapshots-{n}"
        sc.setJobGroup(group, group)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", IncompleteTableWarning)
                assert len(write_snapshots(changes, tmp_path / str(n), tables=tables)) == n
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        jobs[n] = len(sc.statusTracker().getJobIdsForGroup(group))
    # two queries (the names, the pass), each a job per shuffle stage under adaptive execution
    assert jobs[2] == jobs[40] and jobs[40] <= 6, jobs
    changes.unpersist()


def test_a_table_that_fails_is_named_after_the_others_are_written(spark, moves, tmp_path):
    changes, changes_1 = moves
    with pytest.raises(ValueError, match="^public.s1_t_moves: .*nope"):
        write_snapshots(changes, tmp_path, missing={"public.s1_t_moves": {"nope": 1}})
    ok = sorted(n for n in split_tables(changes_1) if n != "public.s1_t_moves" and snapshot(changes_1, n).num_columns)
    assert sorted(e for e in os.listdir(tmp_path) if not e.startswith(".")) == sorted(map(dir_name, ok))


def test_arguments_are_checked(spark, moves, tmp_path):
    changes, _ = moves
    with pytest.raises(ValueError, match="what="):
        write_snapshots(changes, tmp_path, what="everything")
    with pytest.raises(ValueError, match="format="):
        write_snapshots(changes, tmp_path, format="csv")
    with pytest.raises(ValueError, match="as_of_lsn"):
        write_snapshots(changes, tmp_path, what="history", as_of_lsn=5)
    with pytest.raises(ValueError, match="object stores"):
        write_snapshots(changes, "s3://bucket/tables")


def test_a_base_under_the_changes(spark, moves, tmp_path):
    """A table's base (its rows as of an LSN, from outside the archive), a DataFrame or a
    Parquet path, comes first as in one process; the DataFrame's hidden directory is gone."""
    changes, changes_1 = moves
    rows = pa.table({"id": pa.array([1, 40], pa.int32()), "v": ["base one", "base forty"]})
    pq.write_table(rows, tmp_path / "base.parquet")
    bases = {"public.s0_t_moves": spark.createDataFrame(rows.to_pylist(), "id int, v string"),
             "public.s4_t_moves": str(tmp_path / "base.parquet"),
             "public.s4_only_base": str(tmp_path / "base.parquet")}    # no change: the table is its base
    lsns = {"public.s0_t_moves": 50, "public.s4_t_moves": 4_000_000, "public.s4_only_base": 10}
    out = tmp_path / "out"
    written = write_snapshots(changes, out, tables="public.s0_t_moves,public.s4_*", base=bases, base_lsn=lsns)
    assert [w.table for w in written] == sorted(bases)
    for w in written:
        want = snapshot(changes_1, w.table, base=rows, base_lsn=lsns[w.table])
        assert 40 in want.column("id").to_pylist()
        _same(_read(w.path, "parquet"), as_written(want), w.table)
    assert written[1].rows == 2
    assert sorted(os.listdir(out)) == sorted([".pgoutput_codec.mirror.lock", *map(dir_name, bases)])
