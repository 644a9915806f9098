"""What one table's changes hold, found by one small job (:func:`table_info`): which
relation bears the name, its Relation versions in use (column lists, ordered by their
last change), its truncates, whether an Update may have moved a row to a new key, and
where each version's changes start and end (:class:`TableInfo`)."""

from __future__ import annotations

import re
from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..idents import parse_name
from ..relations import bearer, split_name
from . import types as ST
from .dataframes import physical_plan
from .decoded import pass2_of
from .environment import check_workers

__all__ = ["TableInfo", "table_info", "table_of", "pos", "rescanned_cheaply"]


class TableInfo(NamedTuple):
    """What :func:`table_info`'s job finds about one table."""

    versions: list       # the Relation versions in use: column lists, ordered by their last change
    truncates: list      # (rank, seq, commit_lsn, commit_ts), in order
    sends_old: bool      # some Update sends its old key or row ('K'/'O'): it may move a row to a new key
    deletes: bool        # some Delete is given: with sends_old, whether any row leaves its key
    fingerprints: list = []   # each version's relation_version (its definition's fingerprint)
    relation_id: int | None = None   # the relation that bears the name (relations.bearer; None: by name)
    replaced: bool = False    # another relation bore the name before it
    found: bool = True        # some relation bears it (False: renamed away, none does)
    # each version's first and last change (rank, seq), as ``versions``: rank None where the
    # key alone orders commits (GivenHeads.serial); as of the cut asked for, ``upto``:
    # (column list, fingerprint, first, last change) of the versions used up to it (change
    # rows read back)
    firsts: list = []
    lasts: list = []
    upto: list | None = None
    copied: bool = False      # some change is a copied row ('R'): the archive holds the table's start


def table_of(changes: DataFrame, name) -> tuple[str, str]:
    """The (schema, table) ``name`` names (:func:`~pgoutput_codec.relations.split_name`):
    an unquoted name with several dots is resolved against the tables ``changes`` hold
    that it may name, in one small job (none for any other name)."""
    cands = parse_name(name)
    if len(cands) == 1:
        return cands[0]
    which = F.lit(False)
    for s, t in cands:
        which = which | ((F.col("schema") == F.lit(s)) & (F.col("table") == F.lit(t)))
    found = changes.where(which).select("schema", "table").distinct().collect()
    return split_name(name, {(r["schema"], r["table"]) for r in found})


def table_info(changes: DataFrame, name: str, as_of_lsn=None) -> TableInfo:
    """One small job: which relation bears the name (as of ``as_of_lsn``; the rule of
    :func:`pgoutput_codec.relations.bearer`), and over all its changes its Relation
    versions in use, its truncates, and whether an Update may have changed a key
    (:class:`TableInfo`). Over a DataFrame straight from ``decode_changes`` (FAILFAST,
    no observation) nothing is decoded: ``Pass2.table_info`` reads the payload heads
    (1 M rows, warm, alternating in one session: 2.8–2.9 s against 3.1–3.4 s reading
    the decoded ``relation_version``, 3.6 s reading the column lists: handing each row
    to Python costs Spark more than decoding it). Over any other DataFrame, its decoded
    rows: every version's facts, the bearer's kept on the driver; where reading them
    again is a scan (:func:`rescanned_cheaply`), the column lists in a second job, from
    each version's first row (:func:`_columns_apart`)."""
    check_workers(changes.sparkSession)
    pass2 = pass2_of(changes)
    if pass2 is not None:
        return pass2.table_info(*table_of(changes, name), as_of_lsn)
    schema, table = table_of(changes, name)
    rank = "commit_rank" if "commit_rank" in changes.columns else "commit_lsn"
    at = F.struct(F.col(rank).alias("r"), F.col("seq").alias("s"))
    by = at if as_of_lsn is None else F.when(F.col("commit_lsn") <= F.lit(int(as_of_lsn)).cast(ST.LSN_TYPE), at)
    apart = rescanned_cheaply(changes)
    rows = (changes.groupBy("relation_version")
            .agg(F.first("relation_id", ignorenulls=True).alias("relation_id"),
                 F.first("schema", ignorenulls=True).alias("schema"), F.first("table", ignorenulls=True).alias("table"),
                 F.max(at).alias("last"), F.max(by).alias("last_by"), F.min(at).alias("first"),
                 F.min(by).alias("first_by"),
                 F.min("seq").alias("first_seq") if apart else F.first("columns", ignorenulls=True).alias("columns"),
                 F.collect_list(F.when(F.col("op") == "T", F.struct(at.alias("pos"), "commit_lsn", "commit_ts")))
                 .alias("truncates"),
                 F.max((F.col("op") == "U") & F.col("before").isNotNull()).alias("old"),
                 F.max(F.col("op") == "D").alias("dels"), F.max(F.col("op") == "R").alias("copied"))
            .collect())
    # openGauss rows carry no relation id: there the name is the table
    chosen, replaced = bearer([(r["relation_id"] if r["relation_id"] is not None else (r["schema"], r["table"]),
                                r["schema"] == schema and r["table"] == table) for r in rows],
                              [None if r["last_by"] is None else pos(r["last_by"]) for r in rows])
    rows = sorted((rows[k] for k in chosen), key=lambda r: pos(r["last"]))
    cols = _columns_apart(changes, {r["relation_version"]: r["first_seq"] for r in rows}) if apart \
        else [r["columns"] for r in rows]
    lists = [None if c_ is None else [c.asDict() for c in c_] for c_ in cols]
    kept = [(r, c_) for r, c_ in zip(rows, lists, strict=True) if c_ is not None]
    truncs = sorted((t["pos"]["r"], t["pos"]["s"], t["commit_lsn"], t["commit_ts"])
                    for r in rows for t in r["truncates"])
    upto = None
    if as_of_lsn is not None:   # the versions used up to the cut, by their last change there
        used = sorted((k for k in kept if k[0]["last_by"] is not None), key=lambda k: pos(k[0]["last_by"]))
        upto = [(c_, r["relation_version"], pos(r["first_by"]), pos(r["last_by"])) for r, c_ in used]
    return TableInfo([c_ for _, c_ in kept], truncs, any(r["old"] for r in rows), any(r["dels"] for r in rows),
                      [r["relation_version"] for r, _ in kept], rows[0]["relation_id"] if rows else None, replaced,
                      bool(rows), [pos(r["first"]) for r, _ in kept], [pos(r["last"]) for r, _ in kept], upto,
                      any(r["copied"] for r in rows))


def pos(p) -> tuple:
    """A (rank, seq) struct as a tuple."""
    return p["r"], p["s"]


#: physical plan nodes that run Python: a DataFrame whose rows come through one is costly
#: to compute again (decoding, typing)
_PYTHON_NODES = re.compile(r"Python|InPandas|InArrow|ArrowEval|BatchEval")


def rescanned_cheaply(changes: DataFrame) -> bool:
    """Whether reading ``changes`` once more costs a scan, not a computation: cached, or
    files (a lake table) with no Python step and no shuffle in between. Then
    :func:`table_info` reads the column lists apart (:func:`_columns_apart`)."""
    if getattr(changes, "is_cached", False):
        return True
    plan = physical_plan(changes)
    return "Exchange" not in plan and not _PYTHON_NODES.search(plan)


def _columns_apart(changes: DataFrame, first_seq: dict) -> list:
    """Each version's column list (``first_seq``: {relation_version: its smallest ``seq``}),
    read from those rows alone, in a job of its own. Reading every row's list in the
    versions job cost Spark 0.6–0.9 s of its 1.4 s on 1 M change rows in Parquet; the
    filter on ``seq`` lets the Parquet reader skip the row groups by their statistics.
    A version whose first row carries no list (not one of ours) is looked for in all its rows."""
    def lists(where) -> dict:
        return {r[0]: r[1] for r in changes.where(where).groupBy("relation_version")
                .agg(F.first("columns", ignorenulls=True)).collect()}

    def of(versions) -> Column:
        rv, known = F.col("relation_version"), [v for v in versions if v is not None]
        at = rv.isin(known) if known else F.lit(False)
        return at | rv.isNull() if None in versions else at

    seqs = [s for s in first_seq.values() if s is not None]
    found = lists(of(first_seq) & F.col("seq").isin(seqs)) if seqs else {}
    missing = [v for v in first_seq if found.get(v) is None]
    if missing:
        found.update(lists(of(missing)))
    return [found.get(v) for v in first_seq]
