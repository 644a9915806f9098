"""Change rows of openGauss/GaussDB frames at cluster scale: the ``source="opengauss"``
branch of :func:`.changes.decode_changes` (:func:`frame_changes`).

The same rows as the single-process :func:`pgoutput_codec.opengauss.changes.decode_changes`
(``OPENGAUSS_CHANGE_SCHEMA``), correct across partitions and parallel. openGauss sends
whole committed transactions (B … C), but one transaction may span frames, and so
partitions; and the single-process decoder derives three things from the whole input:
the transaction a record belongs to, its ``seq`` (the record's ordinal among the decoded
records of the input), each record's column list (its new tuple's, else the version in
force: the table's latest earlier new tuple in arrival order, which may sit in any earlier
frame) and its key (its old tuple's names, else the key in force, found the same way
from old tuples).

How (two passes, nothing threaded from one task to the next):

1. ``mapInArrow`` decodes every frame and keeps per frame only its order key, the number
   of decoded records, the first error, and a few *facts*: its Begin/Commit records (with
   their ordinal in the frame), the first selected DML record after each of them (a DML
   record outside a transaction opens one, as in the single-process decoder), and per
   table its first and last new tuple's columns and its first and last old tuple's names
   (its keys).
   These are collected to the driver, which walks the frames in arrival order:
   transaction boundaries (each transaction is named by the frame and ordinal of its
   first record), what each commit emits (xid, commit LSN, origin, commit time, or
   nothing for an excluded user), each frame's ``seq`` base and the transaction open at
   its start, every table's column lists and keys with the frame from whose end each is
   in force (one per ``ALTER TABLE`` the archive spans, not one per frame), and the
   declared keys. That plan is broadcast.
2. ``mapInArrow`` over every partition decodes its frames again and emits the change
   rows of their records (built a column at a time, :func:`..opengauss.rows.change_rows`;
   the transaction walk steps once per transaction), placed by the plan alone: any
   partitioning and any row order gives the same rows. Rows of a transaction whose Commit is in another frame get their
   commit facts from the plan; rows of a transaction never committed are dropped.

``order_by`` is the arrival-order contract of :mod:`.changes` (``None``: file order, then
row index in the file; a column name or list of integral columns). Rows come in no
particular order; ``sort=True`` orders them as the single-process decoder does (commit
order, then ``seq``).

Modes (:mod:`.modes`), per input row (frame): a frame is malformed when it holds a
record in error (a frame that does not parse is one error record). ``FAILFAST``
(default) raises on the driver, in pass 1, for the first malformed frame in arrival
order, naming its order key, the record's lsn (when read) and the byte offset.
``PERMISSIVE`` adds ``error`` and ``_corrupt_record`` columns and one row per malformed
frame: ``op`` null, ``seq`` where its first bad record sits among the decoded records,
``lsn`` that record's, the error text (order key, lsn, decoder text) and the whole
frame's bytes. ``DROPMALFORMED`` leaves those rows out. In both, the records in error
are skipped and the good records of a malformed frame still give their change rows, as
the single-process decoder's ``errors="drop"`` does. With ``observation`` (a
``pyspark.sql.Observation``) the first action reports ``rows_in``, ``rows_decoded`` and
``rows_in_error`` over the frames (rows in = rows decoded + rows in error, every mode).
``errors=`` is the older spelling: "raise" is FAILFAST, anything else DROPMALFORMED.
"""

from __future__ import annotations

import bisect
import decimal
import json
import logging
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..arrays import one_array
from ..commitorder import OUT_OF_ORDER, REPLAY, TAKE, judge_commit, order_error
from ..pgoutput.messages import format_lsn
from ..opengauss import STYLES, decode_batch
from ..opengauss.columns import TableShapes, column_types, commit_timestamps, key_names, parse_keys
from ..opengauss.rows import change_rows, record_kinds, selected_dml, transaction_runs
from ..selection import commit_window, parse_table_list
from . import types as ST
from .archiverows import order_key
from .changerows import DecodedChanges, change_type, drop_malformed, dropped_columns, record
from .modes import (COUNT_FIELDS, DROPMALFORMED, FAILFAST, PERMISSIVE, check_mode, failfast_error, observe_counts,
                    with_count_row)
from .shipping import check_workers, to_workers

__all__ = ["frame_changes", "frame_error"]


_log = logging.getLogger("pgoutput_codec")
_PAYLOAD = "__og_payload"
_KEY = "__og_key"
_RANK = "__og_commit_rank"
_FACTS_SCHEMA = T.StructType([
    T.StructField("key", T.LongType(), False),
    T.StructField("ngood", T.LongType(), False),
    T.StructField("error", T.StringType()),
    T.StructField("facts", T.StringType(), False),
])


def frame_error(key, lsn, text: str) -> str:
    """What is wrong with a malformed frame: its order key, the bad record's lsn (None when
    not read) and the decoder's text (record type, byte offset in the frame)."""
    at = f", lsn {format_lsn(lsn)}" if lsn is not None else ""
    return f"Malformed openGauss frame (order key {key}{at}): {text}"


def _decode(payload, style, envelope):
    payload = one_array(payload)
    return decode_batch(payload, style=style, envelope=envelope, workers=1)   # (a task per core already)


class _Facts:
    """Pass 1: per frame its order key, decoded-record count, first error and facts, a
    column at a time: per record only flat columns are read (kind, table number, tuple
    lengths, :func:`..opengauss.rows.record_kinds`) into numpy; the Begin/Commit fields
    and the few tuples that decide a table's columns and keys in each frame (its first
    and last new tuple, first and last old tuple) are fetched by index. Python steps once
    per event (Begin, Commit, a transaction's first selected DML) and per (frame, table),
    not per record."""

    def __init__(self, style, envelope, patterns):
        self.style, self.envelope, self.patterns = style, envelope, patterns
        self.selected = {}

    def __call__(self, batches: Iterator[pa.RecordBatch]):
        for b in batches:
            recs = _decode(b.column(0), self.style, self.envelope)
            keys = b.column(1).to_pylist()
            err = recs.column("error")
            first_err = {}     # input row -> frame_error text of its first bad record
            if err.null_count != len(err):
                bad = recs.filter(pc.is_valid(err))
                for row, lsn, text in zip(bad.column("row").to_pylist(), bad.column("lsn").to_pylist(),
                                          bad.column("error").to_pylist(), strict=True):
                    if row not in first_err:
                        first_err[row] = frame_error(keys[row], lsn, text)
            good = recs.filter(pc.is_null(err)) if first_err else recs
            facts = self._facts(good, len(keys))
            out = {"key": keys, "ngood": facts[0], "error": [first_err.get(i) for i in range(len(keys))],
                   "facts": [json.dumps({"events": e, "tables": t}) for e, t in zip(facts[1], facts[2], strict=True)]}
            yield pa.RecordBatch.from_pydict(out, schema=ST.arrow_schema_for(_FACTS_SCHEMA))

    def _facts(self, good: pa.Table, n_frames: int):
        """(records per frame, events per frame, {table json: facts} per frame)."""
        events = [[] for _ in range(n_frames)]
        tables = [{} for _ in range(n_frames)]
        rows = good.column("row").to_numpy(zero_copy_only=False).astype(np.int64)    # frame per record: they rise
        ngood = np.bincount(rows, minlength=n_frames)
        if not len(good):
            return ngood.tolist(), events, tables
        kinds = record_kinds(good)
        fstart = np.searchsorted(rows, np.arange(n_frames))
        k = np.arange(len(rows)) - fstart[rows]
        # events: Begin, Commit, and each selected DML record that follows one (or opens
        # its frame): a DML record outside a transaction opens one (the driver needs only
        # those after a Commit; the others keep the facts as the frame reads)
        is_ctl = kinds.begin | kinds.commit
        sel = selected_dml(kinds, good, self.patterns, self.selected)
        ev = np.flatnonzero(is_ctl | sel)
        opens = np.r_[True, (rows[ev][1:] != rows[ev][:-1]) | is_ctl[ev][:-1]] if len(ev) else np.zeros(0, bool)
        ev = ev[is_ctl[ev] | opens]
        ctl = ev[is_ctl[ev]]
        vals = good.select(["type", "xid", "origin_id", "user_name", "commit_time", "lsn"]) \
            .take(pa.array(ctl, pa.int64())).to_pylist()
        at = dict(zip(ctl.tolist(), vals, strict=True))
        for j, f, kk in zip(ev.tolist(), rows[ev].tolist(), k[ev].tolist(), strict=True):
            v = at.get(j)
            if v is None:
                events[f].append([kk, "D"])
            elif v["type"] == "B":
                events[f].append([kk, "B", v["xid"], v["origin_id"], v["user_name"], v["commit_time"]])
            else:
                events[f].append([kk, "C", v["xid"], v["lsn"], v["commit_time"]])
        # per (frame, table): first and last new tuple, first and last old tuple
        dml = np.flatnonzero(kinds.dml)
        ntab = int(kinds.table.max(initial=0)) + 1
        pair = rows[dml] * ntab + kinds.table[dml]

        def length(side):
            return pc.fill_null(pc.list_value_length(good.column(side)), 0).to_numpy(zero_copy_only=False)[dml] > 0
        ends = {}
        for side, has in (("new", length("new_tuple")), ("old", length("old_tuple"))):
            idx, p = dml[has], pair[has]
            u, first = np.unique(p, return_index=True)
            last = len(p) - 1 - np.unique(p[::-1], return_index=True)[1]
            ends[side] = {int(a): (int(idx[b]), int(idx[c])) for a, b, c in zip(u, first, last, strict=True)}
        want = sorted({j for e in ends.values() for fl in e.values() for j in fl})
        tup = good.select(["schema", "table", "new_tuple", "old_tuple"]).take(pa.array(want, pa.int64())).to_pylist()
        tup_at = dict(zip(want, tup, strict=True))
        for p in sorted(set(ends["new"]) | set(ends["old"])):
            new, old = ends["new"].get(p), ends["old"].get(p)
            r = tup_at[(new or old)[0]]
            v = tables[p // ntab][json.dumps([r["schema"], r["table"]])] = {}
            if new is not None:     # the columns: the last new tuple's, else the first old tuple's
                v["new"] = column_types(tup_at[new[1]]["new_tuple"])
                if new[0] != new[1]:
                    first = column_types(tup_at[new[0]]["new_tuple"])
                    if first != v["new"]:
                        v["first"] = first
            else:
                v["old"] = column_types(tup_at[old[0]]["old_tuple"])
            if old is not None:     # the keys: the last old tuple's, and the first one's if another
                v["key"] = key_names(tup_at[old[1]]["old_tuple"])
                if old[0] != old[1]:
                    first = key_names(tup_at[old[0]]["old_tuple"])
                    if first != v["key"]:
                        v["key_first"] = first
        return ngood.tolist(), events, tables


def _plan(rows, *, excluded, skip_empty_xacts, mode, replays="drop", declared=None):
    """The driver's walk over every frame's facts, in arrival order; every Commit judged
    by :func:`pgoutput_codec.commitorder.judge_commit` (``replays="drop"``)."""
    rows = sorted(rows, key=lambda r: r["key"])
    for a, b in zip(rows, rows[1:], strict=False):
        if a["key"] == b["key"]:
            raise ValueError(f"order key {a['key']} appears on two frames: the arrival order must be unique")
    if mode == FAILFAST:
        for r in rows:
            if r["error"] is not None:
                raise failfast_error(r["error"])
    frames = {}      # key -> (frame index, seq base, transaction open at the frame's start)
    commits = {}     # transaction -> [rank, emit, had rows, xid, commit lsn, origin, commit time]
    shapes = TableShapes()
    first, versions = {}, {}    # table -> its first new tuple's columns; [(frame, columns in force after it)]
    key_first, key_versions = {}, {}    # the same of its keys (old tuples' names)
    seq, txn, rank = 0, None, 0
    taken, replayed = [], []
    for f, r in enumerate(rows):
        frames[r["key"]] = (f, seq, txn[0] if txn else None)
        facts = json.loads(r["facts"])
        for ev in facts["events"]:
            k, typ = ev[0], ev[1]
            if typ == "B":
                txn = [f"{f}:{k}", ev[2], None if ev[3] is None else str(ev[3]), ev[4], ev[5], False]
            elif typ == "D":
                if txn is None:
                    txn = [f"{f}:{k}", None, None, None, None, False]
                txn[5] = True
            else:
                if txn is None:
                    txn = [f"{f}:{k}", None, None, None, None, False]
                tid, bxid, origin, user, bct, had = txn
                xid, lsn = ev[2] if ev[2] is not None else bxid, ev[3]
                verdict = TAKE if replays == "keep" or lsn is None else judge_commit(taken, lsn)
                if verdict == OUT_OF_ORDER:
                    raise order_error("C", lsn, taken[-1], r["key"])
                if verdict == REPLAY:
                    replayed.append(dict(xid=xid, commit_lsn=lsn, seq=r["key"]))
                emit = verdict == TAKE and (user is None or user not in excluded)
                commits[tid] = [rank, emit, had, xid, lsn, origin, ev[4] or bct, not had and not skip_empty_xacts]
                rank += 1
                txn = None
        for t, v in facts["tables"].items():
            t = tuple(json.loads(t))
            shapes.learn(t, new=v.get("new"), old=v.get("old"))
            if "new" in v:
                new = tuple(map(tuple, v["new"]))
                first.setdefault(t, tuple(map(tuple, v["first"])) if "first" in v else new)
                if t not in versions or versions[t][-1][1] != new:
                    versions.setdefault(t, []).append((f, new))
            if "key" in v:
                key = tuple(v["key"])
                key_first.setdefault(t, tuple(v["key_first"]) if "key_first" in v else key)
                if t not in key_versions or key_versions[t][-1][1] != key:
                    key_versions.setdefault(t, []).append((f, key))
        seq += r["ngood"]
    shapes.declare(declared or {})
    return {"frames": frames, "commits": commits, "first": first, "versions": versions,
            "key_first": key_first, "key_versions": key_versions, "declared": shapes.declared,
            "replayed": replayed}


def _in_force_at(plan, t, f, versions="versions", first="first"):
    """The columns of table ``t`` in force at the start of frame ``f``: its latest new
    tuple's in an earlier frame, else its first new tuple's (None: it has none). With
    ``versions="key_versions", first="key_first"``, its key names, from old tuples."""
    vs = plan[versions].get(t)
    if not vs:
        return None
    at = bisect.bisect_left(vs, f, key=lambda v: v[0])    # the versions set in frames before f
    return vs[at - 1][1] if at else plan[first][t]


class _Changes:
    """Pass 2: the change rows of a partition's frames, placed by the broadcast plan (and,
    but in FAILFAST, one error row per malformed frame; with ``count_rows`` one count row
    per batch, see :func:`.modes.with_count_row`)."""

    def __init__(self, plan_bc, style, envelope, patterns, drop, out_schema, mode, count_rows):
        self.plan_bc, self.style, self.envelope, self.patterns = plan_bc, style, envelope, patterns
        self.drop, self.out_schema, self.mode, self.count_rows = drop, out_schema, mode, count_rows

    def _table(self, table):
        return table.drop_columns(self.drop) if self.drop else table

    def _given(self, plan, good: pa.Table, kinds, keys: list, rows: np.ndarray):
        """The change rows the plan gives of a batch's good records (frame ``rows[j]`` of
        the batch for record ``j``, a frame's records together and in arrival order): per
        row its record (-1: an empty transaction's 'C' marker), seq, commit rank and commit
        facts. One step per transaction, not per record: the events (Begin, Commit,
        selected DML) of a frame fall into runs, one per transaction, starting at a Begin,
        after a Commit, or at the frame's start (continuing the transaction the plan says
        is open there, if any); a run is named as pass 1 named it. ``kinds``:
        :func:`..opengauss.rows.record_kinds` of ``good``."""
        n = len(good)
        if not n:
            return (np.zeros(0, np.int64), np.zeros(0, np.int64), pa.array([], pa.int64()),
                    {"xid": [], "commit_lsn": [], "origin": [], "commit_ts": commit_timestamps([])})
        commits = plan["commits"]
        fstart = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])      # each frame's first record
        frame = np.repeat(np.arange(len(fstart)), np.diff(np.r_[fstart, n]))
        k = np.arange(n) - fstart[frame]
        fplan = [plan["frames"][keys[int(r)]] for r in rows[fstart]]     # (f, seq base, open txn)
        runs = transaction_runs(kinds, selected_dml(kinds, good, self.patterns, self.selected), frame,
                                np.array([p[2] is not None for p in fplan], bool))
        ev, kind, run = runs.ev, runs.kind, runs.run
        efr = frame[ev]
        facts_of = []     # per run: its commit entry, or None
        for e, started in zip(runs.first.tolist(), runs.starts.tolist(), strict=True):
            f, _, txn = fplan[int(efr[e])]
            name = f"{f}:{int(k[ev[e]])}" if started else txn
            facts_of.append(commits.get(name))
        given = np.array([c is not None and bool(c[1]) for c in facts_of], bool)
        marker = np.array([c is not None and bool(c[1]) and bool(c[7]) for c in facts_of], bool)
        out = given[run] & (kind == 2) | marker[run] & (kind == 1)
        j = ev[out]
        take = np.where(kind[out] == 2, j, -1)
        seqs = np.where(kind[out] == 2, np.array([p[1] for p in fplan], np.int64)[frame[j]] + k[j], 0)
        which = pa.array(run[out], pa.int64())
        entries = [c or (None,) * 8 for c in facts_of]      # per run
        facts = {name: pa.array([c[i] for c in entries], t).take(which) for i, name, t in
                 ((3, "xid", pa.uint64()), (4, "commit_lsn", pa.uint64()), (5, "origin", pa.string()))}
        facts["commit_ts"] = commit_timestamps([c[6] for c in entries]).take(which)
        ranks = pa.array([c[0] for c in entries], pa.int64()).take(which)
        return take, seqs, ranks, facts

    def __call__(self, batches: Iterator[pa.RecordBatch]):
        plan = self.plan_bc.value
        target = ST.arrow_schema_for(self.out_schema)
        self.selected = {}
        for b in batches:
            recs = _decode(b.column(0), self.style, self.envelope)
            keys = b.column(1).to_pylist()
            err = recs.column("error")
            rows = recs.column("row").to_numpy()     # input row per record: they rise
            errs = err.to_pylist() if err.null_count != len(err) else None
            bad_rows, bad_texts, bad_at = [], [], []     # one per malformed frame
            if errs is not None:
                good = recs.filter(pc.is_null(err))
                for j, e in enumerate(errs):
                    i = int(rows[j])
                    if e is not None and (not bad_at or bad_at[-1] != i):
                        # the first bad record of its frame; the good ones before it have seq f_seq ..
                        k = j - int(np.searchsorted(rows, i))
                        lsn = recs.column("lsn")[j].as_py()
                        bad_rows.append((plan["frames"][keys[i]][1] + k, lsn))
                        bad_texts.append(frame_error(keys[i], lsn, e))
                        bad_at.append(i)
                rows = good.column("row").to_numpy()
            else:
                good = recs
            kinds = record_kinds(good)
            take, seqs, ranks, facts = self._given(plan, good, kinds, keys, rows)
            frame_of = {g: plan["frames"][keys[g]][0] for g in np.unique(rows).tolist()}
            table = self._table(change_rows(
                good, take, seqs, facts, plan["declared"], group=rows, kinds=kinds,
                initial_of=lambda g, t, fo=frame_of: _in_force_at(plan, t, fo[g]),
                initial_key_of=lambda g, t, fo=frame_of: _in_force_at(plan, t, fo[g], "key_versions", "key_first")))
            n = len(table)
            if self.mode != FAILFAST:
                errors = pa.table({"seq": pa.array([r[0] for r in bad_rows], pa.int64()),
                                   "lsn": pa.array([r[1] for r in bad_rows], pa.uint64())})
                blank = pa.table({f.name: errors.column(f.name) if f.name in errors.column_names
                                  else pa.nulls(len(bad_rows), f.type) for f in table.schema})
                table = pa.concat_tables([table, blank])
                ranks = pa.concat_arrays([ranks, pa.nulls(len(bad_rows), pa.int64())])
                payload = b.column(0)
                table = table.append_column("error", pa.concat_arrays([
                    pa.nulls(n, pa.string()), pa.array(bad_texts, pa.string())]))
                table = table.append_column(ST.CORRUPT_RECORD, pa.concat_arrays([
                    pa.nulls(n, payload.type), payload.take(pa.array(bad_at, pa.int64()))]))
                n += len(bad_rows)
            table = table.append_column(_RANK, ranks)
            cols = {name: one_array(table.column(name)) for name in table.column_names}
            if self.count_rows:
                cols = with_count_row(cols, n, len(keys), len(bad_at))
            arrays = [ST.to_spark_arrow(cols[f.name], f.type) for f in target]
            yield pa.RecordBatch.from_arrays(arrays, schema=target)


def frame_changes(df: DataFrame, payload: str = "data", order_by=None, style: str = "b", *,
                  envelope: str = "auto", tables=None, skip_empty_xacts: bool = True,
                  include_xids: bool = True, include_timestamp: bool = True,
                  include_origin: bool = True, exclude_users=None, mode: str = FAILFAST,
                  observation=None, errors: str | None = None, sort: bool = False,
                  after_lsn=None, until_lsn=None, replays: str = "drop", keys=None) -> DataFrame:
    """The change rows of :func:`.changes.opengauss_decode_changes` (its docstring: the
    options), in two passes (the module docstring)."""
    check_workers(df.sparkSession)
    if replays not in ("drop", "keep"):
        raise ValueError(f"replays must be 'drop' or 'keep', not {replays!r}")
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    window = commit_window(after_lsn, until_lsn)
    declared = parse_keys(keys)
    mode = check_mode(mode)
    if errors is not None:
        mode = FAILFAST if errors == "raise" else DROPMALFORMED
    patterns = parse_table_list(tables)
    excluded = set(exclude_users.split(",") if isinstance(exclude_users, str) else exclude_users or ())
    src = df.select(F.col(f"`{payload}`").alias(_PAYLOAD), order_key(df, order_by).alias(_KEY))
    facts = src.mapInArrow(_Facts(style, envelope, patterns), _FACTS_SCHEMA).collect()
    plan = _plan([r.asDict() for r in facts], excluded=excluded, skip_empty_xacts=skip_empty_xacts, mode=mode,
                 replays=replays, declared=declared)
    replayed = plan.pop("replayed")
    if replayed:
        _log.warning("pgoutput_codec: %d openGauss transaction(s) received again (replays) given once, the "
                     "first in the frame of order key %s; replayed_of(changes) lists them",
                     len(replayed), replayed[0]["seq"])
    plan_bc = to_workers(df.sparkSession, plan)
    drop = dropped_columns(include_xids, include_timestamp, include_origin)
    change = change_type(source="opengauss", include_xids=include_xids, include_timestamp=include_timestamp,
                         include_origin=include_origin, mode=FAILFAST if mode == FAILFAST else PERMISSIVE)
    count_rows = observation is not None
    out_schema = T.StructType(list(change.fields) + [T.StructField(_RANK, T.LongType())]
                              + (COUNT_FIELDS if count_rows else []))
    out = src.mapInArrow(_Changes(plan_bc, style, envelope, patterns, drop, out_schema, mode, count_rows),
                         out_schema)
    if sort:   # before observe(): the sort's sampling job would run the metrics a second time
        out = out.orderBy(F.col(_RANK), F.col("seq").asc_nulls_last())
    if count_rows:
        out = observe_counts(out, observation)
    if window is not None:
        lsn = F.col("commit_lsn")
        inside = F.lit(True)
        if window[0] is not None:
            inside = inside & (lsn > F.lit(decimal.Decimal(window[0])).cast(ST.LSN_TYPE))
        if window[1] is not None:
            inside = inside & (lsn <= F.lit(decimal.Decimal(window[1])).cast(ST.LSN_TYPE))
        out = out.where(inside if mode == FAILFAST else (inside | F.col("error").isNotNull()))
    if mode == DROPMALFORMED:
        out = drop_malformed(out)
    return record(out.drop(_RANK), DecodedChanges(replayed=replayed))
