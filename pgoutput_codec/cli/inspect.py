"""``inspect``: what a pgoutput archive holds (message types, tables, LSN/xid/commit-time
ranges, protocol features, commit order, errors), and its table as printed."""

from __future__ import annotations

import collections

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..pgoutput import facts
from ..archive import ArchiveError, archive_catalog, iter_archive, read_archive_parts
from ..arrays import lsn_array
from ..changes.boundaries import boundaries
from ..pgoutput.batch import decode_batch_with_state
from ..pgoutput.messages import format_lsn, parse_lsn
from ..threads import prefetch
from .decode import BATCH_ROWS
from .console import note_recaptured, progress
from .transcode import transcoded, transcoder

__all__ = ["inspect_archive", "by_table", "commit_order", "format_inspect", "TAG_NAMES"]

#: message tag -> the name of its message class (``B`` -> ``Begin``)
TAG_NAMES = {tag: f.name for tag, f in facts.FACTS.items()}


def inspect_archive(archive, *, payload="data", envelope="auto", encoding=None, jobs=None) -> dict:
    """Counts and ranges of an archive (what ``inspect`` prints); ``encoding``: the client
    encoding it was captured under, when not UTF-8 (read through a Transcoder, payloads it
    cannot rewrite counted as errors). ``jobs``: threads decoding (None: as a batch's size pays for); the
    archive is read in batches (``decode.BATCH_ROWS``), the next while one is decoded."""
    parts = read_archive_parts(archive)
    by_type = collections.Counter()
    by_rel = collections.defaultdict(collections.Counter)   # relation_id -> op counts
    rel_name = {}
    features = dict.fromkeys(["binary values", "streaming", "two-phase", "logical messages", "origins",
                              "unchanged TOAST"], False)
    lsn_lo = lsn_hi = xid_lo = xid_hi = ts_lo = ts_hi = None
    errors, first_errors = 0, []
    n = 0
    state = None
    seq_lo = seq_hi = None
    metas = []
    commit_lsns, commit_keys = [], []   # C/c/K in arrival order: the archive's order check
    copying = [False, None]   # inside a COPY transaction (Begin xid 0), and its commit LSN, across batches
    copied_at: dict = {}      # relation_id -> commit LSN of the first COPY transaction with its rows
    recode = transcoder(encoding, "PERMISSIVE", envelope)
    total = sum(p.num_rows or 0 for p in parts) or None
    with progress(total, "inspect") as bar:
        for part, t in prefetch(iter_archive(parts, payload, on_recaptured=note_recaptured, batch_rows=BATCH_ROWS)):
            if recode is not None:
                t, _ = transcoded(recode, t)
            if part.meta:
                metas.append(part.meta)
            msgs, state = decode_batch_with_state(t.column("data"), envelope=envelope, in_stream=state, workers=jobs)
            types = msgs.field("type")
            is_commit = pc.fill_null(pc.is_in(types, value_set=pa.array(["C", "c", "K"])), False)
            if pc.any(is_commit).as_py():
                sel = np.flatnonzero(is_commit.to_numpy(zero_copy_only=False))
                commit_lsns.append(msgs.field("commit_lsn").take(sel).fill_null(0).to_numpy().astype(np.int64))
                commit_keys.append(t.column("seq").take(sel).to_numpy() if "seq" in t.column_names else n + sel)
            n += len(msgs)
            for v in pc.value_counts(pc.drop_null(types)).to_pylist():
                by_type[v["values"]] += v["counts"]
            err = msgs.field("error")
            if err.null_count != len(err):
                bad = np.flatnonzero(err.is_valid().to_numpy(zero_copy_only=False))
                errors += len(bad)
                for i in bad[: max(0, 5 - len(first_errors))]:
                    s = t.column("seq")[int(i)].as_py() if "seq" in t.column_names else None
                    first_errors.append(f"seq {s}: {err[int(i)].as_py()}")
            if "seq" in t.column_names and len(t):
                mn, mx = pc.min_max(t.column("seq")).values()
                seq_lo = mn.as_py() if seq_lo is None else min(seq_lo, mn.as_py())
                seq_hi = mx.as_py() if seq_hi is None else max(seq_hi, mx.as_py())
            if "lsn" in t.column_names and len(t):
                mn, mx = pc.min_max(lsn_array(t.column("lsn"), len(t))).values()
                if mn.is_valid:
                    lsn_lo = mn.as_py() if lsn_lo is None else min(lsn_lo, mn.as_py())
                    lsn_hi = mx.as_py() if lsn_hi is None else max(lsn_hi, mx.as_py())
            xids = pc.drop_null(msgs.field("xid"))
            if len(xids):
                mn, mx = pc.min_max(xids).values()
                xid_lo = mn.as_py() if xid_lo is None else min(xid_lo, mn.as_py())
                xid_hi = mx.as_py() if xid_hi is None else max(xid_hi, mx.as_py())
            cts = pc.drop_null(msgs.field("commit_ts"))
            if len(cts):
                mn, mx = pc.min_max(cts).values()
                ts_lo = mn.as_py() if ts_lo is None else min(ts_lo, mn.as_py())
                ts_hi = mx.as_py() if ts_hi is None else max(ts_hi, mx.as_py())
            tags = set(by_type)
            features["streaming"] |= bool(tags & set(facts.FEATURE_TAGS["streaming"]))
            features["two-phase"] |= bool(tags & set(facts.FEATURE_TAGS["two-phase"]))
            features["logical messages"] |= "M" in tags
            features["origins"] |= "O" in tags
            for side in ("new_tuple", "old_tuple"):
                kinds = pc.list_flatten(msgs.field(side)).field("kind") if len(msgs) else None
                if kinds is not None and len(kinds):
                    vc = {v["values"] for v in pc.value_counts(kinds).to_pylist()}
                    features["binary values"] |= "b" in vc
                    features["unchanged TOAST"] |= "u" in vc
            rel_rows = pc.equal(types, "R")
            if pc.any(rel_rows).as_py():
                # the names only: a Relation's column list as Python objects would cost
                # ~150 bytes a column, every time it is resent
                at = pc.fill_null(rel_rows, False)
                for rid, ns, name in zip(*(msgs.field(f).filter(at).to_pylist()
                                           for f in ("relation_id", "namespace", "relation_name")), strict=True):
                    rel_name[rid] = f"{ns or 'pg_catalog'}.{name}"
            iud = pc.fill_null(pc.is_in(types, value_set=pa.array(["I", "U", "D"])), False)
            copied = copied_inserts(msgs, copying)
            if copied is not None:
                at = pa.array(copied[0])
                for rid, lsn in zip(msgs.field("relation_id").filter(at).to_pylist(), copied[1][copied[0]].tolist(),
                                    strict=True):
                    by_rel[rid]["R"] += 1
                    copied_at.setdefault(rid, lsn)
                iud = pc.and_(iud, pa.array(~copied[0]))
            if pc.any(iud).as_py():
                sub = msgs.filter(iud)
                keys = pc.binary_join_element_wise(pc.cast(sub.field("relation_id"), "string"), sub.field("type"), ":")
                for v in pc.value_counts(keys).to_pylist():
                    rid, op = v["values"].split(":")
                    by_rel[int(rid)][op] += v["counts"]
            trunc = pc.fill_null(pc.equal(types, "T"), False)
            if pc.any(trunc).as_py():
                for r in msgs.filter(trunc).field("relation_ids").to_pylist():
                    for rid in r or ():
                        by_rel[rid]["T"] += 1
            bar.update(len(t))
    return {
        "archive": archive, "files": len(parts), "messages": n, "seq": (seq_lo, seq_hi),
        "lsn": (format_lsn(lsn_lo) if lsn_lo is not None else None,
                format_lsn(lsn_hi) if lsn_hi is not None else None),
        "xid": (xid_lo, xid_hi), "commit_ts": (ts_lo, ts_hi),
        "by_type": dict(by_type),
        "by_table": by_table(by_rel, rel_name),
        "complete_from": by_table({rid: complete_from(rid, copied_at, metas) for rid in by_rel}, rel_name,
                                  value=lambda v: v),
        "features": features, "errors": errors, "first_errors": first_errors,
        "captured_with": metas[-1] if metas else None,
        "commits": commit_order(commit_lsns, commit_keys),
        "types": recorded_types(parts),
    }


def recorded_types(parts) -> dict:
    """What the archive's type catalog records: its versions, and its types by kind
    (``error``: why it cannot be read)."""
    try:
        cat = archive_catalog(parts)
    except ArchiveError as e:
        return {"versions": 0, "kinds": {}, "error": str(e)}
    if cat is None:
        return {"versions": 0, "kinds": {}}
    kinds = collections.Counter()
    for u in cat.registry().types.values():
        kinds[u.kind] += 1
    return {"versions": len(cat), "kinds": dict(sorted(kinds.items()))}


def copied_inserts(msgs, copying: list):
    """(mask of the Inserts among ``msgs`` that sit in a COPY transaction — Begin xid
    0 —, each row's copy commit LSN) or None when there is none. ``copying``: [inside
    one, its commit LSN] at the batch's start, left as at its end."""
    types = msgs.field("type")
    begin = pc.fill_null(pc.equal(types, "B"), False).to_numpy(zero_copy_only=False)
    end = pc.fill_null(pc.is_in(types, value_set=pa.array(["C"])), False).to_numpy(zero_copy_only=False)
    if not begin.any() and not end.any() and not copying[0]:
        return None
    xid = pc.fill_null(msgs.field("xid"), 1).to_numpy(zero_copy_only=False)
    lsn_b = pc.fill_null(msgs.field("final_lsn"), 0).to_numpy(zero_copy_only=False)
    carried = [copying[0], 0 if copying[0] else 1, copying[1] or 0]
    inside, in_xid, lsn = boundaries(begin, end, xid, lsn_b, carried)
    inside &= in_xid == 0
    copying[0] = carried[0] and carried[1] == 0
    copying[1] = carried[2] if copying[0] else None
    mask = inside & pc.fill_null(pc.equal(types, "I"), False).to_numpy(zero_copy_only=False)
    return (mask, lsn) if mask.any() else None


def complete_from(rid: int, copied_at: dict, metas: list):
    """The LSN from which the archive holds relation ``rid`` whole (its copy's commit
    LSN, text), or None: no copy of it. Files that record their copies (capture's
    ``copy`` metadata) say when a table's copy is complete (a table copied in chunks is
    whole only after its last); without that record, its first COPY transaction's."""
    recorded = [m["copy"] for m in metas if isinstance(m, dict) and isinstance(m.get("copy"), dict)]
    if recorded:
        done = [c.get("lsn") for c in recorded for t in c.get("tables", ()) if t.get("relid") == rid
                and t.get("complete")]
        done = [parse_lsn(x) if isinstance(x, str) else x for x in done if x is not None]
        return format_lsn(min(done)) if done else None
    return format_lsn(copied_at[rid]) if rid in copied_at else None


def by_table(by_rel: dict, rel_name: dict, value=dict) -> dict:
    """Counts by table name (a relation under its last name), and by relation where one
    name was borne by several (a table dropped and created again, or swapped: the
    counts of each, ``public.t [relation 16385]``, never one overwriting the other)."""
    names = {rid: rel_name.get(rid, f"relation {rid}") for rid in by_rel}
    shared = {n for n, k in collections.Counter(names.values()).items() if k > 1}
    return {(f"{n} [relation {rid}]" if n in shared else n): value(by_rel[rid]) for rid, n in names.items()}


def commit_order(lsns: list, keys: list) -> dict:
    """The archive's commits in arrival order, judged as the change decoders judge them
    (``ChangeDecoder`` ``replays``): ``replayed`` — order keys of commits whose LSN an
    earlier commit had (received again); ``out_of_order`` — the first commit below an
    earlier one that repeats none (seq, its LSN, the highest before it), or None.
    ``lsns``/``keys``: arrays of commit LSNs and their order keys, part by part."""
    lsn = np.concatenate(lsns) if lsns else np.zeros(0, np.int64)
    key = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    out = {"count": int(len(lsn)), "replayed": [], "out_of_order": None}
    if not len(lsn):
        return out
    high = np.maximum.accumulate(lsn)
    behind = np.flatnonzero(lsn[1:] <= high[:-1]) + 1
    if len(behind):
        _, first = np.unique(lsn, return_index=True)
        first_of = dict(zip(lsn[first].tolist(), first.tolist(), strict=True))
        again = np.array([first_of[int(lsn[i])] < i for i in behind], dtype=bool)
        out["replayed"] = key[behind[again]].tolist()
        if (~again).any():
            i = int(behind[~again][0])
            out["out_of_order"] = {"seq": int(key[i]), "lsn": format_lsn(int(lsn[i])),
                                   "after": format_lsn(int(high[i - 1]))}
    return out


def format_inspect(r) -> str:
    """The table ``inspect`` prints for the dict of :func:`inspect_archive` (or of the
    openGauss one, which names its record types in ``type_names``)."""
    names = r.get("type_names") or TAG_NAMES
    files = f"{r['files']} file{'s' * (r['files'] != 1)}"
    if r.get("source") == "opengauss":
        lines = [f"archive   {r['archive']}  ({files}, {r['frames']} openGauss '{r['style']}' frames, "
                 f"{r['messages']} records, {r['heartbeats']} heartbeats skipped)"]
    else:
        lines = [f"archive   {r['archive']}  ({files}, {r['messages']} messages)"]
    if r["seq"][0] is not None:
        lines.append(f"seq       {r['seq'][0]} .. {r['seq'][1]}")
    if r["lsn"][0] is not None:
        lines.append(f"lsn       {r['lsn'][0]} .. {r['lsn'][1]}")
    if r["xid"][0] is not None:
        lines.append(f"xid       {r['xid'][0]} .. {r['xid'][1]}")
    if r["commit_ts"][0] is not None:
        lines.append(f"commits   {r['commit_ts'][0]:%Y-%m-%d %H:%M:%S.%f%z} .. {r['commit_ts'][1]:%Y-%m-%d %H:%M:%S.%f%z}")
    m = r["captured_with"]
    if m:
        lines.append(f"captured  slot {m.get('slot')}, publication {m.get('publication')}, PostgreSQL "
                     f"{m.get('server_version')}, options " + (" ".join(
                         f"{k}={v}" for k, v in zip(m.get("options", [])[0::2], m.get("options", [])[1::2], strict=False)
                         if k != "publication_names") or "-"))
    kind = "record type" if r.get("source") == "opengauss" else "message type"
    lines += ["", f"{kind:28} {'count':>9}", f"{'-' * 28} {'-' * 9}"]
    for tag, c in sorted(r["by_type"].items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"{tag} {names.get(tag, '?'):26} {c:9}")
    lines += ["", f"{'table':32} {'copied':>8} {'insert':>8} {'update':>8} {'delete':>8} {'truncate':>8}  "
              "complete from", f"{'-' * 32} {'-' * 8} {'-' * 8} {'-' * 8} {'-' * 8} {'-' * 8}  {'-' * 13}"]
    complete = r.get("complete_from") or {}
    for tbl, c in sorted(r["by_table"].items()):
        since = complete.get(tbl) if "complete_from" in r else "-"
        lines.append(f"{tbl:32} {c.get('R', 0):8} {c.get('I', 0):8} {c.get('U', 0):8} {c.get('D', 0):8} "
                     f"{c.get('T', 0):8}  " + (since or ("copy not complete" if c.get("R") else "start unknown")))
    if not r["by_table"]:
        lines.append("(no row changes)")
    c = r["commits"]
    order = f"{c['count']} commits, commit LSNs rising in arrival order"
    if c["replayed"] or c["out_of_order"]:
        order = f"{c['count']} commits"
        if c["replayed"]:
            shown = ", ".join(map(str, c["replayed"][:5])) + (", …" if len(c["replayed"]) > 5 else "")
            order += f"; {len(c['replayed'])} received again (replays, given once; seq {shown})"
        if c["out_of_order"]:
            o = c["out_of_order"]
            order += (f"; OUT OF ORDER from seq {o['seq']} (commit LSN {o['lsn']} after {o['after']}): "
                      "the change decoders refuse it (order_by=, or replays='keep')")
    t = r.get("types")
    if t is not None and t.get("error"):
        lines += ["", f"types     unreadable: {t['error']}"]
    elif t is not None and t["versions"]:
        kinds = ", ".join(f"{k} {n}" for k, n in t["kinds"].items())
        lines += ["", f"types     {sum(t['kinds'].values())} recorded in {t['versions']} version"
                      f"{'s' * (t['versions'] != 1)} ({kinds})"]
    elif t is not None:
        lines += ["", "types     no catalog recorded (user-defined types: decode with --catalog FILE)"]
    lines += ["", "features  " + ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in r["features"].items()),
              f"order     {order}", f"errors    {r['errors']}"]
    lines += [f"          {e}" for e in r["first_errors"]]
    return "\n".join(lines)
