"""The replay rules on Spark against one process, one small archive per rule: for each
rule of :mod:`pgoutput_codec.tables.rules` (``RULES``), its Spark twin of the same name in
:mod:`pgoutput_codec.spark.rules` gives the single process's snapshot (as of every
commit), history and net changes from the same change rows. Each test is named after the
rule it holds to parity (``test_<rule>_…``), as are the tests of the rules' longer
scenarios in test_replay_spark.py and test_typed_tables_spark.py."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from pgoutput_codec import (Begin, Commit, Delete, Insert, Relation, RelationColumn, TupleColumn,  # noqa: E402
                            Truncate, Update)
from pgoutput_codec import decode_changes as decode_changes_1  # noqa: E402
from pgoutput_codec.spark import decode_changes, history, net_changes, snapshot  # noqa: E402
from pgoutput_codec.tables import history as history_1  # noqa: E402
from pgoutput_codec.tables import snapshot as snapshot_1  # noqa: E402
from change_corpus import _encoded, collect, write_files  # noqa: E402  (tests/spark is on sys.path: conftest)

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")


def test_every_rule_has_its_spark_twin_and_a_parity_test():
    """Each rule of tables.rules.RULES is a function of the same name in spark.rules,
    and a test of tests/spark named after it (``test_<rule>_…``) holds the two to the
    same results."""
    from pgoutput_codec.spark import rules as spark_rules
    from pgoutput_codec.tables import rules
    tests = set()
    for path in Path(__file__).parent.glob("test_*.py"):
        tests |= set(re.findall(r"^def (test_\w+)\(", path.read_text(), re.M))
    for rule in rules.RULES:
        twin = getattr(spark_rules, rule, None)
        assert inspect.isfunction(twin) and twin.__module__ == spark_rules.__name__ and twin.__doc__, rule
        assert any(n.startswith(f"test_{rule}_") for n in tests), rule


def _norm(table: pa.Table) -> list:
    """Rows as sorted reprs, LSNs as ints (Spark's are decimals), times left out (the
    two sides give them as the same instants, in other types)."""
    def value(v):
        return int(v) if type(v).__name__ == "Decimal" else v
    return sorted(repr(sorted((k, value(v)) for k, v in r.items() if not k.endswith("_AT")))
                  for r in table.to_pylist())


def _changes(spark, tmp_path, archive: pa.Table):
    return decode_changes(spark.read.parquet(*write_files(archive, tmp_path / "arc", 2)), order_by="seq", lsn=None)


def _same_tables(spark, tmp_path, archive: pa.Table, name: str, **kw):
    """snapshot (as of every commit), history and net_changes of table ``name`` on
    Spark equal one process's, from the same change rows."""
    from pgoutput_codec.tables import net_changes as net_1
    single = decode_changes_1(archive)
    ch = _changes(spark, tmp_path, archive)
    commits = sorted(set(single.column("commit_lsn").to_pylist()) - {None})
    for cut in [*commits[:-1], None]:
        assert _norm(collect(snapshot(ch, name, as_of_lsn=cut, **kw))) == \
            _norm(snapshot_1(single, name, cut, **kw)), cut
    assert _norm(collect(history(ch, name))) == _norm(history_1(single, name))
    assert _norm(collect(net_changes(ch, name, **kw))) == _norm(net_1(single, name, **kw))
    return single


def _rel(rid, name, cols, ident="d"):
    """A Relation of int/text columns: ``cols`` as (name, type oid, key)."""
    return Relation(relation_id=rid, namespace="public", relation_name=name, replica_identity=ident,
                    columns=tuple(RelationColumn(int(k), n, o, -1) for n, o, k in cols))


def _tup(*vals):
    return tuple(TupleColumn("n", None) if v is None else TupleColumn("u", None) if v == "<u>"
                 else TupleColumn("t", str(v).encode()) for v in vals)


def _txns(*bodies) -> pa.Table:
    """Each body one transaction, committed at LSN 10, 20, …, as an archive."""
    msgs = []
    for x, body in enumerate(bodies, 1):
        msgs += [Begin(final_lsn=10 * x, commit_ts=x, xid=x), *body, Commit(commit_lsn=10 * x, end_lsn=10 * x + 1,
                                                                            commit_ts=x)]
    return _encoded(msgs)[0]


INT, TEXT = 23, 25


def test_identity_key_names_rows_by_the_key_or_the_whole_row(spark, tmp_path):
    """A table keyed by id (DEFAULT) and one by the whole row (FULL)."""
    d = _rel(16600, "d", [("id", INT, 1), ("v", TEXT, 0)])
    f = _rel(16601, "f", [("id", INT, 1), ("v", TEXT, 1)], "f")
    arc = _txns([d, Insert(relation_id=16600, new_tuple=_tup(1, "a")), Insert(relation_id=16600, new_tuple=_tup(2, "b")),
                 f, Insert(relation_id=16601, new_tuple=_tup(1, "a")), Insert(relation_id=16601, new_tuple=_tup(2, "b"))],
                [Update(relation_id=16600, new_tuple=_tup(1, "a2")),
                 Update(relation_id=16600, old_kind="K", old_tuple=_tup(2, None), new_tuple=_tup(3, "b")),
                 Update(relation_id=16601, old_kind="O", old_tuple=_tup(1, "a"), new_tuple=_tup(1, "a2"))],
                [Delete(relation_id=16600, old_kind="K", old_tuple=_tup(1, None)),
                 Delete(relation_id=16601, old_kind="O", old_tuple=_tup(2, "b"))])
    for name in ("public.d", "public.f"):
        _same_tables(spark, tmp_path / name, arc, name)


def test_row_key_reads_a_column_added_after_a_row_as_null(spark, tmp_path):
    """Under FULL, a column added after a row was written is in the key the row's later
    changes send (null): they find the row."""
    r1 = _rel(16610, "rk", [("k", INT, 1), ("v", TEXT, 1)], "f")
    r2 = _rel(16610, "rk", [("k", INT, 1), ("v", TEXT, 1), ("w", TEXT, 1)], "f")
    arc = _txns([r1, Insert(relation_id=16610, new_tuple=_tup(1, "a")), Insert(relation_id=16610, new_tuple=_tup(2, "b"))],
                [r2, Insert(relation_id=16610, new_tuple=_tup(3, "c", "x")),
                 Delete(relation_id=16610, old_kind="O", old_tuple=_tup(1, "a", None))],
                [Update(relation_id=16610, old_kind="O", old_tuple=_tup(2, "b", None), new_tuple=_tup(2, "b2", "y"))])
    single = _same_tables(spark, tmp_path, arc, "public.rk")
    assert sorted((r["k"], r["v"], r["w"]) for r in snapshot_1(single, "public.rk").to_pylist()) == \
        [(2, "b2", "y"), (3, "c", "x")]


def test_unknown_key_error_refuses_an_update_that_names_no_row(spark, tmp_path):
    """No column is a key and an Update sends no old row: both refuse it, in the same words."""
    r = _rel(16620, "nk", [("id", INT, 0), ("v", TEXT, 0)], "n")
    arc = _txns([r, Insert(relation_id=16620, new_tuple=_tup(1, "a"))],
                [Update(relation_id=16620, new_tuple=_tup(1, "b"))])
    with pytest.raises(ValueError, match=r"public\.nk: an Update committed at 20 carries no old key"):
        snapshot_1(decode_changes_1(arc), "public.nk")
    with pytest.raises(Exception, match=r"public\.nk: an Update committed at 20 carries no old key"):
        collect(snapshot(_changes(spark, tmp_path, arc), "public.nk"))


def test_count_alike_holds_rows_alike_as_many_times_as_the_server(spark, tmp_path):
    """A table with no key: rows alike added, one of them changed, one removed, a row
    never seen removed, one added again."""
    r = _rel(16630, "ms", [("k", INT, 1), ("v", TEXT, 1)], "f")
    arc = _txns([r, *[Insert(relation_id=16630, new_tuple=_tup(1, "a")) for _ in range(3)],
                 Insert(relation_id=16630, new_tuple=_tup(2, "b"))],
                [Update(relation_id=16630, old_kind="O", old_tuple=_tup(1, "a"), new_tuple=_tup(1, "c"))],
                [Delete(relation_id=16630, old_kind="O", old_tuple=_tup(1, "a")),
                 Delete(relation_id=16630, old_kind="O", old_tuple=_tup(9, "z"))],
                [Insert(relation_id=16630, new_tuple=_tup(2, "b"))])
    single = _same_tables(spark, tmp_path, arc, "public.ms")
    assert sorted((r["k"], r["v"]) for r in snapshot_1(single, "public.ms").to_pylist()) == \
        [(1, "a"), (1, "c"), (2, "b"), (2, "b")]


def test_same_copy_makes_no_version_of_a_row_copied_again(spark, tmp_path):
    """Copied rows ('R'), one copied again equal to the row held (tests/copied_rows.py)."""
    from copied_rows import copy_archive
    _same_tables(spark, tmp_path, copy_archive(), "public.t")


def test_base_for_stands_for_the_rows_before_the_changes(spark, tmp_path):
    """A base as of 0x100 under changes after it (an unchanged TOAST value from the base's row)."""
    from copied_rows import BASE, uncopied_archive

    from pgoutput_codec.tables import net_changes as net_1
    arc, lsn = uncopied_archive(), 0x100
    single = decode_changes_1(arc)
    ch = _changes(spark, tmp_path, arc)
    base = spark.createDataFrame([(r["id"], r["v"]) for r in BASE.to_pylist()], "id int, v string")
    for fn, fn_1 in ((snapshot, snapshot_1), (history, history_1), (net_changes, net_1)):
        got = collect(fn(ch, "public.t", base=base, base_lsn=lsn))
        assert _norm(got) == _norm(fn_1(single, "public.t", base=BASE, base_lsn=lsn)), fn.__name__


def test_after_truncate_only_later_changes_make_the_rows(spark, tmp_path):
    r = _rel(16640, "tr", [("id", INT, 1), ("v", TEXT, 0)])
    arc = _txns([r, Insert(relation_id=16640, new_tuple=_tup(1, "a")), Insert(relation_id=16640, new_tuple=_tup(2, "b"))],
                [Truncate(options=0, relation_ids=(16640,)), Insert(relation_id=16640, new_tuple=_tup(3, "c"))],
                [Update(relation_id=16640, new_tuple=_tup(3, "c2")), Insert(relation_id=16640, new_tuple=_tup(2, "b2"))],
                [Truncate(options=0, relation_ids=(16640,))],
                [Insert(relation_id=16640, new_tuple=_tup(4, "d"))])
    single = _same_tables(spark, tmp_path, arc, "public.tr")
    assert snapshot_1(single, "public.tr").to_pylist() == [{"id": 4, "v": "d"}]


def test_gone_names_a_row_never_seen_by_its_key(spark, tmp_path):
    """A Delete and a key change of rows older than the changes (never seen), the moved
    one's TOAST value unsaid."""
    r = _rel(16650, "gn", [("id", INT, 1), ("v", TEXT, 0)])
    arc = _txns([r, Delete(relation_id=16650, old_kind="K", old_tuple=_tup(7, None)),
                 Update(relation_id=16650, old_kind="K", old_tuple=_tup(8, None), new_tuple=_tup(9, "<u>"))],
                [Insert(relation_id=16650, new_tuple=_tup(1, "a"))],
                [Delete(relation_id=16650, old_kind="K", old_tuple=_tup(1, None))])
    _same_tables(spark, tmp_path, arc, "public.gn")


def test_net_key_names_rows_by_the_columns_every_identity_held(spark, tmp_path):
    """DEFAULT (id), then FULL: net changes name rows by id."""
    d = _rel(16660, "nk2", [("id", INT, 1), ("v", TEXT, 0)])
    f = _rel(16660, "nk2", [("id", INT, 1), ("v", TEXT, 1)], "f")
    arc = _txns([d, Insert(relation_id=16660, new_tuple=_tup(1, "a")), Insert(relation_id=16660, new_tuple=_tup(2, "b"))],
                [f, Update(relation_id=16660, old_kind="O", old_tuple=_tup(1, "a"), new_tuple=_tup(1, "a2"))],
                [Delete(relation_id=16660, old_kind="O", old_tuple=_tup(2, "b"))])
    from pgoutput_codec.tables import net_changes as net_1
    single = _same_tables(spark, tmp_path, arc, "public.nk2")
    assert sorted((r["__OP"], r["id"]) for r in net_1(single, "public.nk2").to_pylist()) == \
        [("delete", 2), ("upsert", 1)]


def test_warn_incomplete_when_no_copy_truncate_or_base_says_the_start(spark, tmp_path):
    """A table whose changes hold no copy warns on both, once per call; one copied does not."""
    import warnings

    from copied_rows import copy_archive

    from pgoutput_codec.tables import IncompleteTableWarning
    arc = copy_archive()
    single, ch = decode_changes_1(arc), _changes(spark, tmp_path, arc)
    for name, warned in (("public.u", 1), ("public.t", 0)):
        for fn, changes in ((snapshot_1, single), (snapshot, ch), (history_1, single), (history, ch)):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                fn(changes, name)
            assert sum(isinstance(w.message, IncompleteTableWarning) for w in seen) == warned, (name, fn)


def test_as_added_names_rows_alike_by_their_images_as_a_column_came_back(spark, tmp_path):
    """REPLICA IDENTITY FULL (rows named by the whole row): ``b`` dropped, then added
    again, then a Delete of a row written before the drop, its old row sending the new
    ``b`` as null. The row held has the dropped column's value out of it (it is not the
    new column's), so the Delete finds it, as in one process; a table whose column was
    only dropped, too."""
    def rel(*cols):
        return _rel(16670, "fd", [(n, o, 1) for n, o in cols], "f")
    i, a, b = ("id", INT), ("a", TEXT), ("b", TEXT)

    def ins(*v):
        return Insert(relation_id=16670, new_tuple=_tup(*v))
    back = _txns([rel(i, a, b), ins(1, "x", "y"), ins(2, "z", "w")], [rel(i, a), ins(4, "s")],
                 [rel(i, a, b), ins(3, "q", "r")], [Delete(relation_id=16670, old_kind="O", old_tuple=_tup(1, "x", None))])
    single = _same_tables(spark, tmp_path / "back", back, "public.fd")
    assert sorted((r["id"], r["a"], r["b"]) for r in snapshot_1(single, "public.fd").to_pylist()) == \
        [(2, "z", None), (3, "q", "r"), (4, "s", None)]
    dropped = _txns([rel(i, a, b), ins(1, "x", "y"), ins(2, "z", "w")],
                    [rel(i, a), Delete(relation_id=16670, old_kind="O", old_tuple=_tup(1, "x"))])
    single = _same_tables(spark, tmp_path / "dropped", dropped, "public.fd")
    assert snapshot_1(single, "public.fd").to_pylist() == [{"id": 2, "a": "z"}]
