"""Checks shared by the live-server tests and the server-less corpus test.

Everything here works on a :class:`scenarios.Capture` (live, or rebuilt from the committed
corpus), so the committed bytes are held to the same facts as freshly captured ones.

Row/field relations found on PostgreSQL 15.18, 16.14 and 18.4 (SQL interface, see
docs/conformance.md; ``row.lsn``/``row.xid`` are the columns of
``pg_logical_slot_peek_binary_changes``):

- B: ``row.xid == xid``; ``row.lsn`` = LSN of the first change sent (Begin is lazy), i.e.
  equal to the next row's lsn; ``final_lsn == C.commit_lsn``; ``commit_ts == C.commit_ts``.
- C: ``row.lsn == end_lsn``; ``commit_lsn < end_lsn``; ``row.xid`` = the Begin's xid.
- R/Y/O: ``row.lsn`` = the lsn of the change they precede; ``row.xid`` = the transaction's.
- I/U/D/T/M inside B…C or S…E: ``row.xid`` = the top-level xid (never the subxact's,
  which only the streaming xid field carries).
- M: ``lsn == row.lsn``. Non-transactional M: ``row.xid`` = 0 outside a transaction,
  else the emitting transaction's xid; it arrives before that transaction's B.
- S: ``row.xid == xid``; E: ``row.xid`` = the S's xid.
- c: ``row.xid == xid``, ``row.lsn == end_lsn``, ``commit_lsn < end_lsn``.
- A: ``row.xid == subxid`` (not ``xid``!); with abort_lsn (parallel): ``row.lsn == abort_lsn``.
- b/P/p/K/r: ``row.xid == xid``; P/p/K: ``row.lsn == end_lsn``; r: ``row.lsn ==
  rollback_end_lsn``; b matches its P (prepare_lsn, end_lsn, prepare_ts, xid, gid);
  r.prepare_end_lsn == P.end_lsn, r.prepare_ts == P.prepare_ts; K.commit_lsn >= P.end_lsn.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Dict, List, Optional

from pgoutput_codec.pgoutput.messages import parse_lsn

#: (server label, option set) -> Counter(tag -> messages decoded and re-encoded byte-exact)
ROUNDTRIP_COUNTS: "collections.defaultdict" = collections.defaultdict(collections.Counter)

TXN_CHANGES = "RYIUDTMO"


@dataclass
class Row:
    seq: int
    lsn: int
    xid: int
    data: bytes
    msg: object
    in_stream: bool


def decode_rows(rows, decode_message) -> List[Row]:
    """Decode captured rows in order, tracking S/E to pass the right ``in_stream``."""
    out = []
    in_stream = False
    for seq, (lsn, xid, data) in enumerate(rows):
        msg = decode_message(data, in_stream=in_stream)
        out.append(Row(seq, parse_lsn(lsn), xid, data, msg, in_stream))
        if msg.type == "S":
            in_stream = True
        elif msg.type == "E":
            in_stream = False
    return out


def tags(decoded) -> str:
    return "".join(r.msg.type for r in decoded)


# ---------------------------------------------------------------------------------------
# xid / LSN relations
# ---------------------------------------------------------------------------------------
def check_xid_lsn(decoded: List[Row], final_lsn: int) -> List[str]:
    errs = []

    def err(r, what):
        errs.append(f"row {r.seq} {r.msg.type} (lsn {r.lsn:X}, xid {r.xid}): {what}")

    begin = None       # open B
    stream_xid = None  # open S
    prepares = {}      # gid -> P/p
    begin_prepares = {}
    for i, r in enumerate(decoded):
        m, t = r.msg, r.msg.type
        if r.lsn > final_lsn:
            err(r, "row lsn beyond the server's insert LSN at capture time")
        if t == "B":
            if begin is not None:
                err(r, "B inside an open B")
            begin = r
            if m.xid != r.xid:
                err(r, f"B.xid {m.xid} != row xid")
            nxt = decoded[i + 1] if i + 1 < len(decoded) else None
            if nxt is None or nxt.lsn != r.lsn:
                err(r, "B row lsn is not the next row's lsn (lazy Begin)")
        elif t == "b":
            begin = r
            begin_prepares[m.gid] = m
            if m.xid != r.xid:
                err(r, "b.xid != row xid")
        elif t == "C":
            if begin is None or begin.msg.type != "B":
                err(r, "C without B")
            else:
                if begin.msg.final_lsn != m.commit_lsn:
                    err(r, f"B.final_lsn {begin.msg.final_lsn:X} != C.commit_lsn {m.commit_lsn:X}")
                if begin.msg.commit_ts != m.commit_ts:
                    err(r, "B.commit_ts != C.commit_ts")
                if r.xid != begin.xid:
                    err(r, "C row xid != B xid")
            if r.lsn != m.end_lsn or not m.commit_lsn < m.end_lsn:
                err(r, "C: row lsn != end_lsn or commit_lsn >= end_lsn")
            begin = None
        elif t in "Pp":
            if m.xid != r.xid or r.lsn != m.end_lsn or not m.prepare_lsn < m.end_lsn:
                err(r, f"{t}: xid/end_lsn/prepare_lsn relation")
            if t == "P":
                bp = begin_prepares.get(m.gid)
                if begin is None or begin.msg.type != "b" or bp is None:
                    err(r, "P without b")
                elif (bp.prepare_lsn, bp.end_lsn, bp.prepare_ts, bp.xid) != (
                        m.prepare_lsn, m.end_lsn, m.prepare_ts, m.xid):
                    err(r, "b and P disagree")
                begin = None
            prepares[m.gid] = m
        elif t == "K":
            p = prepares.get(m.gid)
            if m.xid != r.xid or r.lsn != m.end_lsn or p is None or p.xid != m.xid \
                    or not m.commit_lsn >= p.end_lsn:
                err(r, "K: xid/end_lsn or its Prepare")
        elif t == "r":
            p = prepares.get(m.gid)
            if m.xid != r.xid or r.lsn != m.rollback_end_lsn or p is None or \
                    p.end_lsn != m.prepare_end_lsn or p.prepare_ts != m.prepare_ts:
                err(r, "r: xid/rollback_end_lsn or its Prepare")
        elif t == "S":
            if m.xid != r.xid or stream_xid is not None or begin is not None:
                err(r, "S: xid or nesting")
            stream_xid = m.xid
        elif t == "E":
            if stream_xid is None or r.xid != stream_xid:
                err(r, "E: not in a stream or xid")
            stream_xid = None
        elif t == "c":
            if m.xid != r.xid or r.lsn != m.end_lsn or not m.commit_lsn < m.end_lsn:
                err(r, "c: xid/end_lsn relation")
        elif t == "A":
            if r.xid != m.subxid:
                err(r, f"A: row xid {r.xid} != subxid {m.subxid}")
            if m.abort_lsn is not None and r.lsn != m.abort_lsn:
                err(r, "A: row lsn != abort_lsn")
        elif t in TXN_CHANGES:
            if t == "M":
                if m.lsn != r.lsn:
                    err(r, "M.lsn != row lsn")
                if not m.flags & 1:  # non-transactional: sent at once, outside B…C
                    if begin is not None and begin.xid == r.xid:
                        err(r, "non-transactional M inside its own transaction")
                    continue
            if stream_xid is not None:
                if r.xid != stream_xid or (t != "O" and m.xid is None):
                    err(r, "change in stream: row xid != S xid, or no streaming xid")
            elif begin is not None:
                if r.xid != begin.xid or (t != "O" and m.xid is not None):
                    err(r, "change in B…C: row xid != B xid, or a streaming xid")
            else:
                err(r, "change outside any transaction")
            if t in "RYO":
                nxt = decoded[i + 1] if i + 1 < len(decoded) else None
                if nxt is None or nxt.lsn != r.lsn:
                    err(r, "R/Y/O row lsn != the next row's lsn")
    return errs


# ---------------------------------------------------------------------------------------
# Relations and types against the catalog
# ---------------------------------------------------------------------------------------
def expected_columns(cap, relid) -> list:
    """The columns pgoutput publishes for ``relid``: (flags, name, type_oid, typmod)."""
    rel = cap.catalog[relid]
    out = []
    for name, typoid, typmod, generated in rel["columns"]:
        if generated == "s" and not (cap.major >= 18):
            continue
        out.append((1 if name in rel["key"] else 0, name, typoid, typmod))
    return out


def check_relations(cap, decoded) -> List[str]:
    errs = []
    last = {}
    for r in decoded:
        m = r.msg
        if m.type == "R":
            rel = cap.catalog.get(m.relation_id)
            if rel is None:
                errs.append(f"R {m.relation_id} {m.relation_name}: not a table of the catalog")
                continue
            got = (m.namespace, m.relation_name, m.replica_identity)
            want = ("" if rel["namespace"] == "pg_catalog" else rel["namespace"], rel["name"], rel["replident"])
            if got != want:
                errs.append(f"R {m.relation_id}: {got} != catalog {want}")
            # With publish_via_partition_root the leaf's own R follows the root's R before the
            # first change routed through that leaf (pgoutput maybe_send_schema sends both);
            # changes still carry the root's relation_id (checked in the scenario facts).
            names = [c.name for c in m.columns]
            catalog_names = [c[0] for c in rel["columns"]]
            if [n for n in catalog_names if n in names] != names:
                errs.append(f"R {rel['name']}: columns {names} not in catalog order {catalog_names}")
            last[m.relation_id] = m
        elif m.type == "Y":
            typ = cap.types.get(m.type_oid)
            if typ is None:
                errs.append(f"Y {m.type_oid}: unknown type")
                continue
            if (m.namespace, m.type_name) != (typ["wire_namespace"], typ["wire_name"]):
                errs.append(f"Y {m.type_oid}: {(m.namespace, m.type_name)} != {typ}")
    for relid, m in last.items():
        got = [tuple(c) for c in m.columns]
        want = expected_columns(cap, relid)
        if got != want:
            errs.append(f"last R of {m.relation_name}: {got} != catalog {want}")
    return errs


# ---------------------------------------------------------------------------------------
# Tuple values
# ---------------------------------------------------------------------------------------
def all_types_inserts(cap, decoded) -> Dict[int, object]:
    relid = next(oid for oid, rel in cap.catalog.items() if rel["name"] == "all_types")
    rel = None
    out = {}
    for r in decoded:
        if r.msg.type == "R" and r.msg.relation_id == relid:
            rel = r.msg
        if r.msg.type == "I" and r.msg.relation_id == relid:
            idcol = r.msg.new_tuple[0]
            rowid = int.from_bytes(idcol.data, "big") if idcol.kind == "b" else int(_text(idcol))
            out[rowid] = (rel, r.msg)
    return out


def _text(col) -> Optional[str]:
    return None if col.kind == "n" else col.data.decode("utf-8")


def check_all_types(cap, decoded, binary: bool) -> List[str]:
    errs = []
    ins = all_types_inserts(cap, decoded)
    if sorted(ins) != sorted(cap.types_text):
        return [f"all_types inserts {sorted(ins)} != rows {sorted(cap.types_text)}"]
    for rowid, (rel, msg) in sorted(ins.items()):
        for col, tc in zip(rel.columns[1:], msg.new_tuple[1:], strict=True):
            text = cap.types_text[rowid][col.name]
            send = cap.types_send[rowid][col.name]
            if text is None:
                ok = tc == ("n", None)
            elif binary and send != "text":
                ok = tc.kind == "b" and tc.data == send
            else:
                ok = tc.kind == "t" and tc.data == text.encode("utf-8")
            if not ok:
                want = text if not binary or send == "text" else send
                errs.append(f"all_types id={rowid} {col.name} (oid {col.type_oid}): got {tc!r}, "
                            f"server says {want!r}")
    return errs


def replay(decoded) -> Dict[int, dict]:
    """Apply the decoded changes in commit order: relid -> {'rel': last R, 'rows': [dict]}.

    Values are the raw (kind, data) wire values; 'u' keeps the old value. Streamed
    changes are buffered per streaming xid until c (A drops a subxact or all), prepared
    ones per gid until K (r drops them)."""
    state: Dict[int, dict] = {}
    rels = {}

    def key_cols(rel, old_kind):
        return [c.name for c in rel.columns if old_kind == "O" or c.flags & 1]

    def find(rows, cols, values):
        for i, row in enumerate(rows):
            if all(row.get(c, ("n", None)) == values[c] for c in cols):
                return i
        raise AssertionError(f"no row with {[(c, values[c]) for c in cols]}")

    def apply(op):
        m = op
        rel = rels[m.relation_id] if m.type != "T" else None
        if m.type == "T":
            for relid in m.relation_ids:
                state.setdefault(relid, {"rel": rels.get(relid), "rows": []})["rows"].clear()
            return
        tbl = state.setdefault(m.relation_id, {"rel": rel, "rows": []})
        tbl["rel"] = rel
        names = [c.name for c in rel.columns]
        if m.type == "I":
            tbl["rows"].append(dict(zip(names, m.new_tuple, strict=True)))
        elif m.type == "U":
            new = dict(zip(names, m.new_tuple, strict=True))
            if m.old_tuple is not None:
                idx = find(tbl["rows"], key_cols(rel, m.old_kind), dict(zip(names, m.old_tuple, strict=True)))
            else:
                idx = find(tbl["rows"], key_cols(rel, "K"), new)
            old = tbl["rows"][idx]
            tbl["rows"][idx] = {n: (old.get(n, ("n", None)) if v.kind == "u" else v) for n, v in new.items()}
        elif m.type == "D":
            idx = find(tbl["rows"], key_cols(rel, m.old_kind), dict(zip(names, m.old_tuple, strict=True)))
            del tbl["rows"][idx]

    txn = None           # ops of the open B…C / b…P
    streams = {}         # top xid -> [(change xid, op)]
    prepared = {}        # gid -> [ops]
    cur_stream = None
    for r in decoded:
        m, t = r.msg, r.msg.type
        if t == "R":
            # a Relation inside a stream belongs to that stream; applying it early is harmless
            rels[m.relation_id] = m
        elif t in "Bb":
            txn = []
        elif t == "C":
            for op in txn:
                apply(op)
            txn = None
        elif t == "P":
            prepared[m.gid] = txn
            txn = None
        elif t == "S":
            cur_stream = m.xid
            streams.setdefault(m.xid, [])
        elif t == "E":
            cur_stream = None
        elif t == "A":
            if m.subxid == m.xid:
                streams.pop(m.xid, None)
            else:
                streams[m.xid] = [(x, op) for x, op in streams.get(m.xid, []) if x != m.subxid]
        elif t == "c":
            for _, op in streams.pop(m.xid, []):
                apply(op)
        elif t == "p":
            prepared[m.gid] = [op for _, op in streams.pop(m.xid, [])]
        elif t == "K":
            for op in prepared.pop(m.gid):
                apply(op)
        elif t == "r":
            prepared.pop(m.gid)
        elif t in "IUDT":
            if cur_stream is not None:
                streams[cur_stream].append((m.xid, m))
            else:
                txn.append(m)
    return state


def check_replay_text(cap, decoded) -> List[str]:
    """Text-mode replay of every published table == the server's final ``SELECT col::text``."""
    errs = []
    state = replay(decoded)
    tables = {t["relid"]: t for t in cap.tables}
    published = {relid for relid, rel in cap.catalog.items() if not rel.get("ispartition")}
    if set(state) != published:
        errs.append(f"replayed relations {sorted(state)} != published tables {sorted(published)}")
    for relid, tbl in state.items():
        rel = tbl["rel"]
        names = [c.name for c in rel.columns]
        snap = tables[relid]
        snap_names = [c["name"] for c in snap["columns"]]
        idx = [snap_names.index(n) for n in names]
        want = sorted((tuple(row[i] for i in idx) for row in snap["rows"]), key=repr)
        got = []
        for row in tbl["rows"]:
            vals = []
            for n in names:
                col = row.get(n, ("n", None))
                if col.kind == "u":
                    vals.append("<unchanged toast never sent>")
                else:
                    vals.append(_text(col))
            got.append(tuple(vals))
        got.sort(key=repr)
        if got != want:
            diff = [g for g in got if g not in want][:2], [w for w in want if w not in got][:2]
            errs.append(f"{snap['schema']}.{snap['table']}: replay has {len(got)} rows, server {len(want)}; "
                        f"only in replay / only on server: {diff}"[:2000])
    return errs


def archive_of(rows):
    """Rows of ``pg_logical_slot_get_binary_changes`` (lsn text, data) as an archive:
    ``seq`` (arrival order), ``lsn``, ``data``."""
    import pyarrow as pa
    return pa.table({"seq": pa.array(range(len(rows)), pa.int64()), "lsn": [r[0] for r in rows],
                     "data": pa.array([bytes(r[1]) for r in rows], pa.binary())})


def rows_by_id(conn, table: str) -> tuple:
    """(the server's rows of ``table`` as {id: {column: value}}, its column names)."""
    cur = conn.execute(f"SELECT * FROM {table} ORDER BY id")
    names = [d.name for d in cur.description]
    return {r[0]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}, names
