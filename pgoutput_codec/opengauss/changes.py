"""openGauss/GaussDB records → the same change rows as pgoutput (``schema.CHANGE_SCHEMA``).

openGauss's parallel decoding sends whole committed transactions (Begin, its DML,
Commit), each DML record self-describing (schema, table, column names, type OIDs, values
in text form). So the transaction context comes from the enclosing B/C records, and the
"Relation" of a row is derived from the records themselves:

- ``columns``: the row's columns as the records name them, versioned like pgoutput's
  Relations (``relation_version``), so that an archive spanning an ``ALTER TABLE`` keeps
  every value: an Insert/Update's are its new tuple's; a record without one (a Delete)
  takes the version in force (:func:`record_columns`: the table's latest earlier new
  tuple in arrival order, else its first later one); and a column its old tuple names
  that these lack is appended. Type OIDs as sent ('b'; typmod -1, not sent) or from the
  type names the text styles send (``numeric(10,2)``: OID and typmod; a name the
  catalog does not hold: OID 0, values as text); key flag on the columns of the key in
  force (:func:`record_key`), when it is narrower than the row; a whole row (REPLICA
  IDENTITY FULL) flags every column, as pgoutput does;
- ``before``/``after``: values aligned to ``columns``; kind 't' (text), 'n' (NULL or a
  column the record did not carry), 'u' (``unchanged-toast-datum``, 't' style);
- ``xid`` is the 64-bit openGauss TransactionId (``uint64``, the only column whose type
  differs from pgoutput's change rows); ``relation_id`` is null (not sent);
  ``origin`` is the origin id as text; ``commit_ts`` parses the commit time text
  (``timestamptz`` output) through the type catalog.

The key is learned only from old tuples: openGauss, like PostgreSQL, sends an Update's
old key only when the key changed (or under REPLICA IDENTITY FULL), and a Delete's. Each
old tuple names the key of its record (the replica identity's columns, the whole row
under FULL); a record without one takes the key in force, like the columns: the table's
latest earlier old tuple's in arrival order, else its first later one's
(:func:`record_key`). So a table whose identity changes mid-archive (``ALTER TABLE …
REPLICA IDENTITY``) has its rows found by each record's own key, as pgoutput's
Relations flag them (:mod:`..tables` re-keys the rows it holds when the key changes).
An archive whose records of a table are Inserts and Updates that kept their key never
names it, and those Updates cannot be matched to their rows: ``keys`` declares tables' keys
(``{"schema.table": ["col", ...]}`` or the text ``"schema.table(col, col), other.t(col)"``;
a declared key wins over the records' for every record of the table), and :func:`..tables.snapshot` and friends refuse
an Update without an old key on a table with no key column rather than keep both rows.

Options as for pgoutput: ``tables`` (white-table-list), ``skip_empty_xacts``,
``include_xids``/``include_timestamp``/``include_origin``, and ``exclude_users`` (a
list or comma-separated names; transactions whose Begin carries such a user name are
dropped, as the server-side option does), and ``replays`` as for pgoutput's
``ChangeDecoder``: a Commit record's ``lsn`` is the transaction's end LSN, and the server
sends transactions in commit order, so these rise; "drop" (default) gives a transaction
received again (a Commit at an LSN an earlier one had: a consumer that reconnected before
confirming what it had archived) once, listed in the ``replayed`` list when one is given (a
warning on the ``pgoutput_codec`` logger names the count), and refuses a Commit below
an earlier one at no LSN seen (the archive out of order) with ``ArchiveOrderError``;
"keep" gives every commit as it comes. Commits without an LSN (text styles without
``sending-batch``) are not judged.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import typed_array
from ..commitorder import OUT_OF_ORDER, REPLAY, TAKE, judge_commit, order_error
from ..errors import PgoutputDecodeError
from ..schema import CHANGE_OPTIONAL
from ..selection import commit_window, in_commit_window, parse_table_list, table_selected
from ..threads import payload_bytes, worker_count
from .batch import decode_batch
from .columns import (OPENGAUSS_CHANGE_SCHEMA, TableShapes, change_row, column_types, commit_timestamps, key_names,
                      parse_keys, record_columns, record_key)
from .rows import change_rows, record_kinds, selected_dml, transaction_runs

__all__ = ["decode_changes", "learn_shapes", "OPENGAUSS_CHANGE_SCHEMA"]

def decode_changes(values, *, style: str = "b", envelope: str = "auto", tables=None, skip_empty_xacts=True,
                   include_xids=True, include_timestamp=True, include_origin=True, exclude_users=None,
                   errors: str = "raise", after_lsn=None, until_lsn=None, replays: str = "drop",
                   replayed: list | None = None, keys=None, by_record: bool = False,
                   workers: int | None = None) -> pa.Table:
    """Change rows (``OPENGAUSS_CHANGE_SCHEMA``) of an Arrow column of openGauss frames.
    ``after_lsn``/``until_lsn``: only the transactions committed in ``(after_lsn,
    until_lsn]``, as for pgoutput's ``ChangeDecoder``. ``replays``: see the module
    docstring; ``replayed``: a list that receives one dict (xid, commit_lsn, seq of the
    Commit record) per transaction received again and dropped. ``keys``: tables' keys the
    records may never name (module docstring). ``by_record``: build the rows record by
    record (:func:`change_row`, the rules' plain statement; the tests' reference) instead
    of a column at a time (:func:`.rows.change_rows`). ``workers``: threads decoding the
    frames (see :func:`~pgoutput_codec.opengauss.decode_batch`); the transactions are
    then followed in this thread."""
    declared = parse_keys(keys)
    window = commit_window(after_lsn, until_lsn)
    if replays not in ("drop", "keep"):
        raise ValueError(f"replays must be 'drop' or 'keep', not {replays!r}")

    # (the transactions are followed in this thread: measured, two workers decoding the
    # frames did not pay at 2 M records, so its default is that of a joined result)
    recs = decode_batch(values, style=style, envelope=envelope, workers=worker_count(workers, payload_bytes(values)))
    err = recs.column("error")
    if err.null_count != len(recs) and errors == "raise":
        i = pc.index(pc.is_valid(err), True).as_py()
        raise PgoutputDecodeError(f"openGauss input row {recs.column('row')[i].as_py()}: {err[i].as_py()}")
    patterns = parse_table_list(tables)
    excluded = set(exclude_users.split(",") if isinstance(exclude_users, str) else exclude_users or ())
    good = recs.filter(pc.is_null(err)) if err.null_count != len(recs) else recs
    kinds = record_kinds(good)
    declared = learn_shapes(good, declared, kinds).declared
    if by_record:
        take, commit, dropped = _walk_by_record(good, patterns, excluded, replays, skip_empty_xacts)
        table = _rows_by_record(good, take, commit, declared)
    else:
        take, commit, dropped = _walk(good, kinds, patterns, excluded, replays, skip_empty_xacts)
        table = change_rows(good, take, np.maximum(take, 0), commit, declared, kinds=kinds)
    if dropped:
        logging.getLogger("pgoutput_codec").warning(
            "pgoutput_codec: %d openGauss transaction(s) received again (replays) given once, the first at "
            "seq %s", len(dropped), dropped[0]["seq"])
    if replayed is not None:
        replayed.extend(dropped)
    if window is not None and len(table):
        table = table.filter(pa.array(in_commit_window(table.column("commit_lsn"), window)))
    opts = dict(include_xids=include_xids, include_timestamp=include_timestamp, include_origin=include_origin)
    drop = [col for opt, col in CHANGE_OPTIONAL.items() if not opts[opt]]
    return table.drop_columns(drop) if drop else table


def learn_shapes(good: pa.Table, declared: dict, kinds) -> TableShapes:
    """The :class:`TableShapes` one walk over the DML records ``good`` learns, from the
    few records that decide it (per table its first old tuple and last new tuple),
    fetched alone; ``declared`` keys checked against it. ``kinds``:
    :func:`.rows.record_kinds` of ``good``."""
    shapes = TableShapes(column_types)
    dml, table = kinds.dml, kinds.table
    if dml.any():
        has = {side: dml & pc.fill_null(pc.greater(pc.list_value_length(good.column(side)), 0), False)
               .to_numpy(zero_copy_only=False) for side in ("new_tuple", "old_tuple")}
        pick = set()
        for side, how in (("new_tuple", "last"), ("old_tuple", "first")):
            idx = np.flatnonzero(has[side])
            t = table[idx]
            if how == "last":
                idx, t = idx[::-1], t[::-1]
            pick.update(idx[np.unique(t, return_index=True)[1]].tolist())
        pick = sorted(pick)
        for r in good.select(["schema", "table", "new_tuple", "old_tuple"]).take(pa.array(pick, pa.int64())).to_pylist():
            old = r["old_tuple"] or None
            shapes.learn((r["schema"], r["table"]), new=r["new_tuple"] or None, old=old)
    shapes.declare(declared)
    return shapes


def _walk(good: pa.Table, kinds, patterns, excluded, replays, skip_empty_xacts):
    """:func:`_walk_by_record` with arrays: one step per commit, not per record; the
    transactions are :func:`.rows.transaction_runs` of the whole input (one frame).
    ``kinds``: :func:`.rows.record_kinds` of ``good``."""
    runs = transaction_runs(kinds, selected_dml(kinds, good, patterns))
    ev, kind, seg = runs.ev, runs.kind, runs.run     # seg: the transaction of each event
    n_seg = len(runs.first)
    seg_first = ev[runs.first]
    begun = kinds.begin[seg_first]
    commits = ev[kind == 1]                           # one per committed transaction, in order
    c_seg = seg[kind == 1]
    c_tab = good.select(["xid", "lsn", "commit_time"]).take(pa.array(commits, pa.int64()))
    b_rec = seg_first[c_seg]
    b_tab = good.select(["xid", "origin_id", "user_name", "commit_time"]).take(
        pa.array(np.where(begun[c_seg], b_rec, -1), pa.int64(), mask=~begun[c_seg]))
    lsn = c_tab.column("lsn")
    lsns = pc.fill_null(lsn, 0).to_numpy(zero_copy_only=False)
    dropped = []
    if replays == "keep" or (lsn.null_count == 0 and bool((lsns[1:] > lsns[:-1]).all())):
        # every commit taken (the rule of judge_commit for rising LSNs): no step per commit
        facts = {"xid": pc.coalesce(c_tab.column("xid"), b_tab.column("xid")), "commit_lsn": lsn,
                 "origin": pc.cast(b_tab.column("origin_id"), pa.string()),
                 "commit_time": pc.coalesce(c_tab.column("commit_time"), b_tab.column("commit_time"))}
        users = b_tab.column("user_name")
        given = pc.invert(pc.fill_null(pc.is_in(users, value_set=pa.array(sorted(excluded), pa.string())), False))
        given = given.to_numpy(zero_copy_only=False)
    else:
        facts, given = _judge_commits(commits, c_tab.to_pylist(), b_tab.to_pylist(), excluded, replays, dropped)
    emit = np.zeros(n_seg, bool)
    emit[c_seg] = given
    committed = np.full(n_seg, -1, np.int64)          # transaction -> its index among the commits
    committed[c_seg] = np.arange(len(c_seg))
    rows_in = np.bincount(seg[kind == 2], minlength=n_seg)
    give = emit[seg] & ((kind == 2) | ((kind == 1) & (rows_in[seg] == 0) & (not skip_empty_xacts)))
    take = np.where(kind[give] == 2, ev[give], -1)
    which = pa.array(committed[seg[give]], pa.int64())
    out = {name: typed_array(facts[name], t).take(which)
           for name, t in (("xid", pa.uint64()), ("commit_lsn", pa.uint64()), ("origin", pa.string()))}
    out["commit_ts"] = commit_timestamps(facts["commit_time"]).take(which)     # parsed once per commit
    return take.astype(np.int64), out, dropped


def _judge_commits(commits, c_vals, b_vals, excluded, replays, dropped):
    """Commit by commit (``changes.judge_commit``): each commit's facts (null where not
    given) and whether it is given; the replays dropped go to ``dropped``."""
    taken = []
    facts = {"xid": [], "commit_lsn": [], "origin": [], "commit_time": []}
    given = []
    for ordinal, c, b in zip(commits.tolist(), c_vals, b_vals, strict=True):
        xid = c["xid"] if c["xid"] is not None else b["xid"]
        lsn = c["lsn"]
        verdict = TAKE if replays == "keep" or lsn is None else judge_commit(taken, lsn)
        if verdict == OUT_OF_ORDER:
            raise order_error("C", lsn, taken[-1], ordinal)
        if verdict == REPLAY:
            dropped.append(dict(xid=xid, commit_lsn=lsn, seq=ordinal))
            row = None
        elif b["user_name"] is None or b["user_name"] not in excluded:
            row = (xid, lsn, None if b["origin_id"] is None else str(b["origin_id"]),
                   c["commit_time"] or b["commit_time"])
        else:
            row = None
        for name, v in zip(facts, row or (None,) * 4, strict=True):
            facts[name].append(v)
        given.append(row is not None)
    return facts, np.array(given, bool)


def _walk_by_record(good: pa.Table, patterns, excluded, replays, skip_empty_xacts):
    """Transactions over the records in arrival order: per change row given, its record's
    index in ``good`` (-1: an empty transaction's 'C' marker) and its commit facts
    (``xid``, ``commit_lsn``, ``origin``, ``commit_time`` text); and the transactions
    dropped as replays. One step per record: the plain statement of :func:`_walk`."""
    cols = {c: good.column(c).to_pylist() for c in
            ("type", "xid", "lsn", "origin_id", "user_name", "commit_time", "schema", "table")}
    types, xids, lsns = cols["type"], cols["xid"], cols["lsn"]
    taken, dropped = [], []
    take, facts = [], {"xid": [], "commit_lsn": [], "origin": [], "commit_time": []}
    selected = {}
    txn = None
    for ordinal, typ in enumerate(types):
        if typ == "B":
            o = cols["origin_id"][ordinal]
            txn = dict(xid=xids[ordinal], origin=None if o is None else str(o), user=cols["user_name"][ordinal],
                       commit_time=cols["commit_time"][ordinal], rows=[])
        elif typ == "C":
            if txn is None:
                txn = dict(xid=None, origin=None, user=None, commit_time=None, rows=[])
            xid = xids[ordinal] if xids[ordinal] is not None else txn["xid"]
            lsn = lsns[ordinal]
            verdict = TAKE if replays == "keep" or lsn is None else judge_commit(taken, lsn)
            if verdict == OUT_OF_ORDER:
                raise order_error("C", lsn, taken[-1], ordinal)
            if verdict == REPLAY:
                dropped.append(dict(xid=xid, commit_lsn=lsn, seq=ordinal))
            elif txn["user"] is None or txn["user"] not in excluded:
                rows = txn["rows"] or ([] if skip_empty_xacts else [-1])
                take += rows
                facts["xid"] += [xid] * len(rows)
                facts["commit_lsn"] += [lsn] * len(rows)
                facts["origin"] += [txn["origin"]] * len(rows)
                facts["commit_time"] += [cols["commit_time"][ordinal] or txn["commit_time"]] * len(rows)
            txn = None
        elif typ in ("I", "U", "D"):
            t = (cols["schema"][ordinal], cols["table"][ordinal])
            sel = selected.get(t)
            if sel is None:
                sel = selected[t] = table_selected(patterns, t[0] or "", t[1] or "")
            if not sel:
                continue
            if txn is None:
                txn = dict(xid=None, origin=None, user=None, commit_time=None, rows=[])
            txn["rows"].append(ordinal)
    facts["commit_ts"] = commit_timestamps(facts.pop("commit_time"))
    return np.array(take, np.int64), facts, dropped


def _rows_by_record(good: pa.Table, take, commit: dict, declared: dict) -> pa.Table:
    """:func:`decode_changes`' rows built record by record by :func:`change_row`: the
    columns and the key in force walked over every DML record in arrival order."""
    rows = good.to_pylist()
    in_force, key_in_force = {}, {}
    for r in rows:
        if r["type"] in ("I", "U", "D"):
            t = (r["schema"], r["table"])
            if r["new_tuple"]:
                in_force.setdefault(t, column_types(r["new_tuple"]))
            if r["old_tuple"]:
                key_in_force.setdefault(t, key_names(r["old_tuple"]))
    built = {}
    wanted = set(take.tolist())
    for ordinal, r in enumerate(rows):
        if r["type"] in ("I", "U", "D"):
            t = (r["schema"], r["table"])
            if r["new_tuple"]:
                in_force[t] = column_types(r["new_tuple"])
            if r["old_tuple"]:
                key_in_force[t] = key_names(r["old_tuple"])
            if ordinal in wanted:
                built[ordinal] = change_row(r, ordinal, record_columns(in_force.get(t), r["old_tuple"]),
                                            record_key(key_in_force.get(t), declared.get(t)))
    out = [dict(built[i]) if i >= 0 else dict(op="C") for i in take.tolist()]
    for row, xid, lsn, origin in zip(out, commit["xid"], commit["commit_lsn"], commit["origin"], strict=True):
        row.update(xid=xid, commit_lsn=lsn, origin=origin)
    table = pa.Table.from_pylist(out, schema=pa.schema([f for f in OPENGAUSS_CHANGE_SCHEMA if f.name != "commit_ts"]))
    return table.append_column("commit_ts", commit["commit_ts"]).select(OPENGAUSS_CHANGE_SCHEMA.names)
