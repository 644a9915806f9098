"""Shared cases of the change-decoding tests (tests/changes/, tests/tables/ and the Spark and
openGauss tests that compare with them): the real-server corpus (``archive``, ``SETS``,
``registry_for``, the servers' tables), value comparison, hand-built streams (``REL``,
``row``, ``enc``) and the archives several tests build."""

from __future__ import annotations

import decimal
import json
import math
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pgoutput_codec import (
    Begin, Commit, Delete, Insert, Relation, RelationColumn, StreamAbort, StreamCommit, StreamStart,
    StreamStop, TupleColumn, encode_message,
)
from pgoutput_codec import BeginPrepare, CommitPrepared, Prepare, RollbackPrepared
from pgoutput_codec import ChangeDecoder, decode_changes
from pgoutput_codec.tables import history, net_changes, snapshot, table_changes  # noqa: F401  (read here by the Spark tests)
from pgoutput_codec.tables.typed import columns_out as _columns_out
from pgoutput_codec.typecatalog import TypeRegistry


DATA = Path(__file__).parent / "data"
CORPUS = pq.read_table(DATA / "corpus.parquet")
TABLES = pq.read_table(DATA / "tables.parquet").to_pylist()
TRUTH = {s["version"].split()[0]: s for s in json.loads((DATA / "ground_truth.json").read_text())["servers"]}
SETS = sorted({(r["server_version"], r["option_set"]) for r in
               CORPUS.select(["server_version", "option_set"]).to_pylist()})
BINARY_SETS = {"v1_binary_messages", "v3_2pc_binary_streaming", "v4_2pc_parallel_origin"}


def registry_for(version: str) -> TypeRegistry:
    """Enums and user arrays from the server catalog (pgoutput's Type message does not
    say a type is an enum; domains are learned from the Type messages themselves)."""
    reg = TypeRegistry()
    types = TRUTH[version]["types"]
    for oid, t in types.items():
        if t["typtype"] == "e":
            reg.register_enum(int(oid), name=t["name"])
    for oid, t in types.items():
        for o2, t2 in types.items():
            if t["name"] == "_" + t2["name"]:
                reg.register_array(int(oid), int(o2))
    return reg


def archive(version, option_set):
    sub = CORPUS.filter(pc.and_(pc.equal(CORPUS["server_version"], version),
                                pc.equal(CORPUS["option_set"], option_set)))
    return sub.sort_by("seq")


def server_table(t, reg) -> pa.Table:
    """The server's final rows (output-function text), typed through the same catalog."""
    cols = [dict(name=n, type_oid=o, type_modifier=m, flags=0)
            for n, o, m in zip(t["column_names"], t["column_type_oids"], t["column_type_modifiers"], strict=True)]
    pairs = []
    for j in range(len(cols)):
        vals = [r[j] for r in t["rows"]]
        pairs.append((pa.array(["n" if v is None else "t" for v in vals], pa.string()),
                      pa.array([None if v is None else v.encode() for v in vals], pa.binary()), None))
    arrays, names = _columns_out(pairs, cols, reg)
    return pa.Table.from_arrays(arrays, names=names)


def same_values(a: pa.ChunkedArray, b: pa.ChunkedArray) -> bool:
    if a.type == b.type and a.equals(b):
        return True
    # NaN != NaN in Arrow's equality; compare NaN-aware through Python values
    def norm(v):
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v
    try:
        return a.type == b.type and norm(a.to_pylist()) == norm(b.to_pylist())
    except (OverflowError, ValueError):   # dates beyond Python's datetime: compare storage
        return False


def known_gap(version, option_set, column, t):
    """Differences we know of and document (docs/types.md, closing notes)."""
    idx = t["column_names"].index(column.replace("__special", "")) if column.replace("__special", "") in \
        t["column_names"] else None
    oid = t["column_type_oids"][idx] if idx is not None else None
    if option_set in BINARY_SETS:
        # a column of arrays with rows of different dimensionality stays raw (send form
        # vs text form); tstzrange from binary is rendered in UTC, text in the TimeZone
        if oid in (1000, 1005, 1007, 1009, 1022, 1231, 3910):
            return True
    return False


STREAM_SETS = [s for s in SETS if "stream" in s[1]]


# ---------------------------------------------------------------- hand-built streams

REL = Relation(relation_id=16400, namespace="public", relation_name="t", replica_identity="d",
               columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1)))
REL2 = Relation(relation_id=16401, namespace="other", relation_name="u", replica_identity="f",
                columns=(RelationColumn(1, "id", 23, -1),))


def row(*vals):
    return tuple(TupleColumn("n", None) if v is None else TupleColumn("u", None) if v == "<u>"
                 else TupleColumn("t", str(v).encode()) for v in vals)


def enc(msgs):
    return [encode_message(m) for m in msgs]


def streamed_with_aborted_subxact(*, stray_abort=False):
    """Transaction 100 streamed in two chunks; its subtransaction 101 (row 2) aborts
    between them. ``stray_abort``: also an abort of an unknown xid."""
    return [
        StreamStart(xid=100, first_segment=True),
        Relation(xid=100, relation_id=REL.relation_id, namespace="public", relation_name="t",
                 replica_identity="d", columns=REL.columns),
        Insert(xid=100, relation_id=16400, new_tuple=row(1, "a")),
        Insert(xid=101, relation_id=16400, new_tuple=row(2, "sub")),
        StreamStop(),
        StreamAbort(xid=100, subxid=101),
        *([StreamAbort(xid=999, subxid=999)] if stray_abort else []),
        StreamStart(xid=100, first_segment=False),
        Insert(xid=100, relation_id=16400, new_tuple=row(3, "c")),
        StreamStop(),
        StreamCommit(xid=100, flags=0, commit_lsn=500, end_lsn=510, commit_ts=1),
    ]


def _plan_for_keys_matches_the_whole_plan(values, keys, pieces, **options):
    """A plan for_keys(lo, hi) answers for the rows in [lo, hi] what the whole plan
    answers: changes (with the whole archive's ranks), change_rows, keep_mask and
    head_facts; and the pieces together pickle to about one plan, not one each."""
    import numpy as np

    from pgoutput_codec.changes import HEAD_BYTES, ControlPlan, control_candidates
    mask = control_candidates(values)
    whole = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], errors="collect", **options)
    o = np.argsort(keys, kind="stable")
    bounds = np.linspace(0, len(keys), pieces + 1, dtype=int)
    sizes = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        rows = o[a:b]
        lo, hi = int(keys[rows].min()), int(keys[rows].max())
        part = pickle.loads(pickle.dumps(whole.for_keys(lo, hi)))
        sizes.append(len(pickle.dumps(part)))
        v, k = values.take(pa.array(rows)), keys[rows]
        assert part.changes(v, k).equals(whole.changes(v, k))
        assert part.change_rows(v, k).equals(whole.change_rows(v, k))
        heads = pc.binary_slice(v, 0, HEAD_BYTES)
        assert (part.keep_mask(heads, k) == whole.keep_mask(heads, k)).all()
        for got, want in zip(part.head_facts(heads, k), whole.head_facts(heads, k), strict=True):
            assert (got == want).all()
        # narrowed twice (a stream partition of a range): the same
        assert part.for_keys(lo - 5, hi + 5).changes(v, k).equals(part.changes(v, k))
    with pytest.raises(ValueError, match="no checkpoint"):
        whole.for_keys(0, 1).checkpoint()
    return whole, sizes


def in_xlogdata(values, framed=lambda i: True) -> pa.Array:
    """The payloads (an Arrow array or a list), those ``framed(i)`` chooses inside
    XLogData ('w') frames: start and end LSN 1000 + i, send time 7."""
    values = values.to_pylist() if isinstance(values, pa.Array) else values
    return pa.array([b"w" + (1000 + i).to_bytes(8, "big") * 2 + (7).to_bytes(8, "big") + d if framed(i) else d
                     for i, d in enumerate(values)], pa.binary())


def _kept_by_row_drops(drops, values, keys) -> list:
    """ControlPlan.row_drops read row by row in plain Python, as its docstring says
    (the Spark filter, ``spark.archiverows.dropped``, is tested against the same plans)."""
    def inside(k, ranges):
        return any((lo is None or k > lo) and (hi is None or k < hi) for lo, hi in ranges)

    kept = []
    for v, k in zip(values.to_pylist(), keys.tolist(), strict=True):
        at = 25 if drops.envelope != "none" and v is not None and v[:1] == b"w" else 0
        streamed = inside(k, drops.stream)
        rel_at = at + 1 + 4 * streamed
        judged = v is not None and v[at:at + 1] in (b"I", b"U", b"D") and len(v) >= rel_at + 4
        xid = int.from_bytes(v[at + 1:at + 5], "big") if judged and streamed else None
        kept.append(not (judged and (
            inside(k, drops.segments)
            or inside(k, drops.relids.get(int.from_bytes(v[rel_at:rel_at + 4], "big"), []))
            or any(inside(k, ranges) and xid in xids for ranges, xids in drops.aborted))))
    return kept


def _given_by_heads(heads, values, keys) -> list:
    """ControlPlan.given_heads read row by row in plain Python, as its docstring says:
    per row (given, a given Update sending its old key/row, a given Delete) — the Spark
    columns (``spark.archiverows.given``) are tested against the same plans."""
    def inside(k, ranges):
        return any((lo is None or k > lo) and (hi is None or k < hi) for lo, hi in ranges)

    out = []
    for v, k in zip(values.to_pylist(), keys.tolist(), strict=True):
        at = 25 if heads.envelope != "none" and v is not None and v[:1] == b"w" else 0
        rel_at = at + 1 + 4 * inside(k, heads.stream)
        tag = v[at:at + 1] if v is not None else b""
        relid = int.from_bytes(v[rel_at:rel_at + 4], "big") if v is not None else None
        ok = (tag in (b"I", b"U", b"D") and len(v) >= rel_at + 4 and not inside(k, heads.orphans)
              and relid in heads.firsts and (heads.firsts[relid] is None or k > heads.firsts[relid]))
        in_force = [i for lo, i in heads.versions.get(relid, []) if lo is None or k > lo] if ok else []
        out.append((ok, ok and tag == b"U" and v[rel_at + 4:rel_at + 5] in (b"K", b"O"), ok and tag == b"D",
                    in_force[-1] if in_force else None))
    return out


def _given_heads_match_head_facts(plan, values, keys, keep, given, old, delete):
    """given_heads says what head_facts says, on the rows keep_mask keeps."""
    import numpy as np

    from pgoutput_codec.changes import HEAD_BYTES
    heads = plan.given_heads()
    assert heads is not None     # these small archives never reach its limits
    got = _given_by_heads(heads, values, keys)
    assert [g[:3] for g, k in zip(got, keep.tolist(), strict=True) if k] == \
        [(bool(a), bool(b), bool(c)) for a, b, c, k in zip(given, old, delete, keep, strict=True) if k]
    chosen = plan._version_selected()
    fp = plan.version_table.column("relation_version").to_pylist()
    assert heads.fingerprints == sorted({f for i, f in enumerate(fp) if chosen is None or chosen[i]})
    # the version in force, read by key from the merged (key, fingerprint) pairs
    version, rank = plan.head_facts(pc.binary_slice(values, 0, HEAD_BYTES), keys)[:2]
    assert [heads.fingerprints[g[3]] for g, k in zip(got, keep.tolist(), strict=True) if k and g[0]] == \
        [fp[v] for v in version[version >= 0]]
    # serial: the given rows' commit ranks rise with their keys
    o = np.argsort(keys[rank >= 0], kind="stable")
    if heads.serial:
        assert (np.diff(rank[rank >= 0][o]) >= 0).all()
    return heads.serial


def _row_drops_match_keep_mask(plan, values, keys, keep):
    """row_drops describes keep_mask's rows exactly wherever the plan drops changes and
    no subtransaction aborted (these small archives never reach its limits)."""
    drops = plan.row_drops()
    if not plan.drops_changes():
        assert drops is None
        return
    assert drops is not None and _kept_by_row_drops(drops, values, keys) == keep.tolist()
    assert bool(drops.aborted) == bool(plan.aborted)


def _keep_mask_matches_changes(values, keys, **options):
    """keep_mask (heads only) leaves out exactly the I/U/D rows changes() leaves out."""
    import numpy as np

    from pgoutput_codec.pgoutput.batch import message_tags
    from pgoutput_codec.changes import HEAD_BYTES, ControlPlan, control_candidates
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], **options)
    tags = message_tags(values)
    iud = np.isin(tags, list(b"IUD"))
    heads = pc.binary_slice(values, 0, HEAD_BYTES)
    keep = plan.keep_mask(heads, keys)
    assert keep[~iud].all()                       # only I/U/D rows are judged
    _row_drops_match_keep_mask(plan, values, keys, keep)
    out = plan.changes(values.filter(pa.array(iud)), keys[iud])
    assert sorted(keys[iud & keep].tolist()) == sorted(out.column("seq").to_pylist())
    rows = plan.change_rows(values, keys)   # aligned: a null row for every row left out
    assert len(rows) == len(values)
    at = pc.is_valid(rows.column("op")).to_numpy(zero_copy_only=False)
    assert (rows.column("seq").to_numpy(zero_copy_only=False)[at] == keys[at]).all()   # row i is row i
    assert sorted(rows.filter(pc.is_valid(rows.column("op"))).column("seq").to_pylist()) == \
        sorted(keys[iud & keep].tolist())
    # head_facts: the Relation version, commit rank, "sends its old key/row" and "is a
    # Delete" of every row changes() gives
    version, rank, old, delete = plan.head_facts(heads, keys)
    given = rank >= 0
    _given_heads_match_head_facts(plan, values, keys, keep, given, old, delete)
    assert ((version >= 0) == given).all() and not given[~iud].any()
    assert not old[~given].any() and not delete[~given].any()
    assert sorted(keys[given].tolist()) == sorted(out.column("seq").to_pylist())
    fingerprint = plan.version_table.column("relation_version").to_pylist()
    facts = {k: (fingerprint[v], r, o, d) for k, v, r, o, d in zip(
        keys[given].tolist(), version[given].tolist(), rank[given].tolist(), old[given].tolist(),
        delete[given].tolist(), strict=True)}
    assert facts == {k: (v, r, op == "U" and bk in ("K", "O"), op == "D") for k, v, r, op, bk in zip(
        out.column("seq").to_pylist(), out.column("relation_version").to_pylist(),
        out.column("commit_rank").to_pylist(), out.column("op").to_pylist(), out.column("before_kind").to_pylist(),
        strict=True)}
    ranges = plan.dropped_key_ranges()
    if ranges is not None:   # the same rows by their order keys alone
        inside = np.zeros(len(keys), dtype=bool)
        for lo, hi in ranges:
            inside |= (keys > (lo if lo is not None else keys.min() - 1)) & \
                (keys < (hi if hi is not None else keys.max() + 1))
        assert (iud & inside).tolist() == (iud & ~keep).tolist()
    return plan, int((iud & ~keep).sum())


def renamed_archive():
    """An archive where relation 16400 is renamed out of and back into ``public.t`` and
    16401 is another table; it opens with a transaction touching both before any
    Relation for them. (values, order keys, the key of each row)."""
    import dataclasses

    import numpy as np
    renamed = dataclasses.replace(REL, relation_name="t_old")

    def txn(xid, *msgs):
        return [Begin(final_lsn=xid, commit_ts=0, xid=xid), *msgs, Commit(commit_lsn=xid, end_lsn=xid + 1, commit_ts=0)]
    values = pa.array(enc([
        *txn(1, Insert(relation_id=16400, new_tuple=row(0, "?")), Insert(relation_id=16401, new_tuple=row(7))),
        *txn(2, renamed, Insert(relation_id=16400, new_tuple=row(1, "a")), REL2, Insert(relation_id=16401,
                                                                                      new_tuple=row(9))),
        *txn(3, REL, Insert(relation_id=16400, new_tuple=row(2, "b"))),
        *txn(4, renamed, Insert(relation_id=16400, new_tuple=row(3, "c")), Insert(relation_id=16401,
                                                                                new_tuple=row(8)))]), pa.binary())
    keys = np.arange(len(values)) * 2 + 5
    return values, keys


def staggered_archive(tables: int = 30):
    """``tables`` tables t0, t1, … whose first Relations come one transaction apart, each
    transaction also touching the next three tables before their Relation: rows before
    their id's first Relation all through the archive. (values, order keys)"""
    import dataclasses

    import numpy as np
    msgs = []
    for k in range(tables):
        msgs += [Begin(final_lsn=k + 1, commit_ts=0, xid=k + 1),
                 *[Insert(relation_id=16400 + j, new_tuple=row(j, "early")) for j in range(k + 1, min(k + 4, tables))],
                 dataclasses.replace(REL, relation_id=16400 + k, relation_name=f"t{k}"),
                 *[Insert(relation_id=16400 + j, new_tuple=row(k, "x")) for j in range(k + 1)],
                 Commit(commit_lsn=k + 1, end_lsn=k + 2, commit_ts=0)]
    values = pa.array(enc(msgs), pa.binary())
    return values, np.arange(len(values)) * 2 + 5


def _plan_and_rows(plan, values, keys, whole, name: str, cut):
    """The table ``name`` as of commit ``cut`` (None: all) both ways: (the plan narrowed
    to it, the plan's change rows up to the cut, ``_resolve``'s (rows, replaced) over the
    change rows ``whole``, those rows up to the cut)."""
    from pgoutput_codec.changes.relations import split_name
    from pgoutput_codec.tables.rows import resolve as _resolve
    resolved = _resolve(whole, name, cut)
    mine = plan.for_table(*split_name(name), cut)
    got = (mine if cut is None else mine.between(until_lsn=cut)).changes(values, keys)
    rows = resolved[0]
    at_cut = rows.filter(pc.less_equal(rows.column("commit_lsn"), pa.scalar(cut or 2 ** 63, pa.uint64())))
    return mine, got, resolved, at_cut


def relation_in_a_prepared_transaction(ending: str) -> list:
    """A prepared transaction sends public.t's Relation and a row; a plain transaction
    then changes t with no Relation of its own and commits (20); the prepared one is
    committed after it (30), rolled back, or still open at the end (``ending``)."""
    msgs = [BeginPrepare(prepare_lsn=10, end_lsn=11, prepare_ts=1, xid=8, gid="g"), REL,
            Insert(relation_id=16400, new_tuple=row(1, "a")),
            Prepare(prepare_lsn=10, end_lsn=11, prepare_ts=1, xid=8, gid="g"),
            Begin(final_lsn=20, commit_ts=2, xid=9), Insert(relation_id=16400, new_tuple=row(2, "b")),
            Commit(commit_lsn=20, end_lsn=21, commit_ts=2)]
    if ending == "commit":
        msgs.append(CommitPrepared(commit_lsn=30, end_lsn=31, commit_ts=3, xid=8, gid="g"))
    elif ending == "rollback":
        msgs.append(RollbackPrepared(prepare_end_lsn=11, rollback_end_lsn=31, prepare_ts=1, rollback_ts=3,
                                     xid=8, gid="g"))
    return msgs


def orphan_archive():
    """A Delete between a Commit and the next Begin (no transaction's), then the same
    Delete in a transaction. (values, order keys)"""
    import numpy as np
    values = pa.array(enc([Begin(final_lsn=1, commit_ts=0, xid=1), REL, Insert(relation_id=16400, new_tuple=row(1, "a")),
                           Commit(commit_lsn=1, end_lsn=2, commit_ts=0),
                           Delete(relation_id=16400, old_kind="K", old_tuple=row(1, None)),      # orphan
                           Begin(final_lsn=3, commit_ts=0, xid=2), Delete(relation_id=16400, old_kind="K",
                                                                          old_tuple=row(1, None)),
                           Commit(commit_lsn=3, end_lsn=4, commit_ts=0)]), pa.binary())
    return values, np.arange(len(values)) * 2


def _both_decoders(msgs):
    """(change rows, errors {seq: text}, counts) from ChangeDecoder in two feeds cut at
    every row (state pickled between them) and from ControlPlan, all ``errors="collect"``;
    asserts they agree and that every row is decoded or in error."""
    import numpy as np

    from pgoutput_codec.changes import ControlPlan, control_candidates
    values, keys = pa.array(msgs, pa.binary()), np.arange(len(msgs), dtype=np.int64)
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], errors="collect")
    want = plan.changes(values, keys, pa.nulls(len(msgs), pa.uint64())).drop_columns(["commit_rank"])
    errors = {e["seq"]: e["error"] for e in plan.last_errors}
    c = plan.last_counts
    assert c["rows_in"] == c["rows_decoded"] + c["rows_in_error"] == len(msgs)
    for cut in range(len(msgs) + 1):
        dec = ChangeDecoder(errors="collect")
        first = dec.feed(msgs[:cut])
        dec = ChangeDecoder.from_state(pickle.loads(pickle.dumps(dec.state)))
        got = pa.concat_tables([first, dec.feed(msgs[cut:])])
        assert got.equals(want), cut
        # (the resumed decoder counts and lists what it saw itself)
    one = ChangeDecoder(errors="collect")
    assert one.feed(msgs).equals(want)
    assert {e["seq"]: e["error"] for e in one.errors} == errors
    assert one.counts["rows_in"] == one.counts["rows_decoded"] + one.counts["rows_in_error"] == len(msgs)
    return want, errors, one.counts


def _resumed_runs(values, keys, lsn, cuts):
    """Decode the archive in successive runs, one per cut (rows with key < cut), each over
    the rows from the previous run's checkpoint on (through JSON): their changes (all
    runs' rows in the order of (``commit_rank``, ``seq``): a run's ranks follow the run
    before's, so a table the runs were appended to sorts into commit order), the last
    checkpoint, the rows read and the kinds of transactions that held a checkpoint."""

    from pgoutput_codec.changes.checkpoint import Checkpoint
    from pgoutput_codec.changes import ControlPlan, checkpoint_after, control_candidates
    cp, out, read, held = None, [], 0, set()
    for cut in cuts:
        sel = (keys < cut) & (keys >= (cp.from_key if cp is not None else keys.min()))
        read += int(sel.sum())
        v, k = values.filter(pa.array(sel)), keys[sel]
        m = control_candidates(v)
        plan = ControlPlan.build(v.filter(pa.array(m)), k[m], resume=cp and cp.to_json())
        out.append(plan.changes(v, k, None if lsn is None else lsn.filter(pa.array(sel))))
        ranks = out[-1].column("commit_rank").to_numpy()
        assert not len(ranks) or ranks.min() >= (cp.rank_base if cp is not None else 0)
        run = out[-1].sort_by([("commit_rank", "ascending"), ("seq", "ascending")]).drop_columns(["commit_rank"])
        nxt = Checkpoint.from_json(plan.checkpoint().to_json())
        assert nxt == plan.checkpoint() and (cp is None or nxt.from_key >= cp.from_key)
        assert not len(ranks) or nxt.rank_base > ranks.max()
        # the single-process decoder resumed from the same checkpoint gives the same rows
        rows = pa.table({"data": v, "seq": pa.array(k)} | ({} if lsn is None else {"lsn": lsn.filter(pa.array(sel))}))
        assert decode_changes(rows, resume=cp).equals(run)
        dec, h = ChangeDecoder(resume=cp), len(rows) // 2    # a resumed decoder's state resumes alike
        first = dec.feed(rows.slice(0, h))
        rest = ChangeDecoder.from_state(pickle.loads(pickle.dumps(dec.state))).feed(rows.slice(h))
        assert pa.concat_tables([first, rest]).equals(run)
        assert checkpoint_after(v, k, resume=cp) == nxt
        held |= {h["kind"] for h in nxt.held_by}
        cp = nxt
    return (pa.concat_tables(out).sort_by([("commit_rank", "ascending"), ("seq", "ascending")])
            .drop_columns(["commit_rank"]), cp, read, held)


def _storage_type(t: pa.DataType) -> pa.DataType:
    """Dates and times as their integers: Python's datetime cannot hold every value."""
    if pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_temporal(t) and not pa.types.is_interval(t):
        return pa.int64()
    if pa.types.is_list(t):
        return pa.list_(_storage_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _storage_type(f.type)) for f in t])
    return t


def _rows(t: pa.Table) -> list:
    return t.cast(pa.schema([pa.field(f.name, _storage_type(f.type)) for f in t.schema])).to_pylist()


def _apply_net(table: pa.Table, net: pa.Table, keycols: list) -> list:
    """A copy of the table (rows as dicts) after a net_changes batch, as a MERGE would do."""
    rows = {tuple(r[k] for k in keycols): r for r in _rows(table)}
    before = dict(rows)
    for r in _rows(net):
        op, keep, src = r.pop("__OP"), r.pop("__UNCHANGED"), r.pop("__UNCHANGED_FROM")
        del r["__COMMIT_LSN"], r["__COMMIT_AT"], r["__RELATION_ID"]
        key = tuple(r[k] for k in keycols)
        if op == "truncate":
            rows.clear()
        elif op == "delete":
            rows.pop(key, None)
        else:   # (the target as it was before the batch holds the unchanged values)
            old = before.get(tuple(src[k] for k in keycols) if src else key, {})
            rows[key] = {c: (old.get(c) if c in keep else v) for c, v in r.items()}
    return _norm(rows.values())


def _in_order(t: pa.Table) -> list:
    """A table's rows in order, as text: NaN equals NaN there."""
    return [repr(r) for r in _rows(t)]


def _norm(rows) -> list:
    """Rows compared as text, columns sorted: NaN equals NaN there; a whole decimal as an
    int (a column retyped int8 -> numeric, archive_model's ``retypes``, holds both); a
    null ``__special`` as none (Spark's schema has one for every retyped column)."""
    def whole(v):
        return int(v) if isinstance(v, decimal.Decimal) and v.is_finite() and v == v.to_integral_value() else v
    return sorted(repr(sorted((k, whole(v)) for k, v in r.items() if not (k.endswith("__special") and v is None)))
                  for r in rows)


# ---------------------------------------------------------------- random archives, the model as oracle

def _model_archive(seed, **kw):
    """Half the archives end with transactions still open (a lake cut at any moment)."""
    import archive_model
    payloads, expected = archive_model.Session(seed, **kw).build(finish=seed % 2 == 0)
    return pa.array(payloads, pa.binary()), expected


def _seq_op(t):
    return list(zip(t.column("seq").to_pylist(), t.column("op").to_pylist(), strict=True))
