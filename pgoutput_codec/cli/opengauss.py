"""``pgoutput-codec decode`` and ``inspect`` over archives of openGauss/GaussDB frames
(``--source opengauss``).

The archive files are read as for pgoutput (:func:`pgoutput_codec.archive.read_archive_parts`:
Parquet with a binary column, a directory of them in ``seq`` order, or a CSV/COPY export
with ``\\x`` hex), one frame per row: a batch (``sending-batch``) or one record, in the
'b', 't' or 'j' style. Rows in, decoded and in error are counted per frame, as Spark's
openGauss functions count them: a frame is in error when one of its records is.

Messages (one row per record) are decoded file by file. Change rows are decoded over the
whole archive at once: the single-process openGauss decoder learns each table's columns
and key from all its records before giving any row (``opengauss.changes``), so the
archive must fit in memory; Spark's ``decode_changes(source="opengauss")`` does not.
"""

from __future__ import annotations

import collections

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..archive import archive_row, iter_archive, read_archive_parts
from ..pgoutput.messages import format_lsn
from ..opengauss import decode_batch, heartbeats, record_positions
from ..opengauss.changes import decode_changes
from ..opengauss.columns import OPENGAUSS_CHANGE_SCHEMA, commit_timestamps
from ..opengauss.schema import RECORD_SCHEMA, RECORD_TYPES
from ..threads import prefetch
from .decode import BATCH_ROWS
from .console import CliError, note_recaptured, progress
from .inspect import commit_order
from .output import ParquetOut

__all__ = ["decode_archive", "inspect_archive"]

#: the frame's own columns kept beside each record, under Spark's ``opengauss_messages`` names
_KEEP = (("seq", "seq"), ("lsn", "source_lsn"), ("xid", "source_xid"))


def _records(t: pa.Table, style: str, envelope: str, jobs=None):
    """(records of the part's frames, frame index per record, frame indexes in error)."""
    recs = decode_batch(t.column("data"), style, envelope=envelope, workers=jobs)
    rows = recs.column("row").to_numpy()
    err = recs.column("error")
    bad = np.unique(rows[err.is_valid().to_numpy(zero_copy_only=False)]) if err.null_count != len(err) \
        else np.zeros(0, np.int64)
    return recs, rows, bad


def _first_error(t: pa.Table, recs: pa.Table, rows: np.ndarray) -> str:
    i = int(np.flatnonzero(recs.column("error").is_valid().to_numpy(zero_copy_only=False))[0])
    return f"malformed openGauss frame at archive {archive_row(t, int(rows[i]))}: {recs.column('error')[i].as_py()}"


def _message_table(t: pa.Table, recs: pa.Table, rows: np.ndarray) -> pa.Table:
    take = pa.array(rows, pa.int64())
    cols, names = [], []
    for src, dst in _KEEP:
        if src in t.column_names:
            cols.append(t.column(src).take(take))
            names.append(dst)
    cols.append(record_positions(rows))
    names.append("record")
    for name in recs.column_names:
        if name != "row":
            cols.append(recs.column(name))
            names.append(name)
    return pa.table(cols, names=names)


def decode_archive(archive, out, *, style="b", changes=False, tables=None, keys=None, mode="FAILFAST",
                   envelope="auto", payload="data", after_lsn=None, until_lsn=None, replays="drop",
                   jobs=None) -> dict:
    """``decode --source opengauss``: returns the counts printed at the end. ``jobs``:
    threads decoding (None: as a batch's size pays for); the archive is read in batches, the next while
    one is decoded and written."""
    parts = read_archive_parts(archive)
    dest = ParquetOut(out, "changes.parquet" if changes else "records.parquet")
    counts = {"rows_in": 0, "rows_decoded": 0, "rows_in_error": 0, "rows_out": 0, "heartbeats": 0}
    total = sum(p.num_rows or 0 for p in parts) or None
    frames, bad_frames = [], []
    with dest:
        with progress(total, "decode") as bar:
            for _, t in prefetch(iter_archive(parts, payload, on_recaptured=note_recaptured, batch_rows=BATCH_ROWS)):
                recs, rows, bad = _records(t, style, envelope, jobs)
                counts["rows_in"] += len(t)
                counts["rows_in_error"] += len(bad)
                counts["heartbeats"] += heartbeats(recs)
                if mode == "FAILFAST" and len(bad):
                    raise CliError(_first_error(t, recs, rows) + " (--mode PERMISSIVE/DROPMALFORMED skips it)")
                if len(bad) and mode == "PERMISSIVE":
                    bad_frames.append(_error_rows(t, recs, rows, bad))
                if changes:
                    frames.append(t.column("data"))
                else:
                    rows_out = _message_table(t, recs, rows)
                    if mode == "DROPMALFORMED":
                        rows_out = rows_out.filter(pc.is_null(rows_out.column("error")))
                    dest.write(rows_out)
                    counts["rows_out"] += len(rows_out)
                bar.update(len(t))
        if changes:
            replayed = []
            values = pa.chunked_array([c if c.type == pa.binary() else c.cast(pa.binary())   # a large_binary file
                                       for f in frames for c in f.chunks], pa.binary())
            rows_out = decode_changes(values, style=style, envelope=envelope, tables=tables, keys=keys,
                                      errors="raise" if mode == "FAILFAST" else "drop", after_lsn=after_lsn,
                                      until_lsn=until_lsn, replays=replays, replayed=replayed, workers=jobs)
            dest.write(rows_out)
            counts["rows_out"] = len(rows_out)
            counts["replayed_transactions"] = len(replayed)
        out = dest.finish(OPENGAUSS_CHANGE_SCHEMA if changes else _message_table(
            pa.table({"data": pa.array([], pa.binary())}), RECORD_SCHEMA.empty_table(), np.zeros(0, np.int64)).schema)
    counts["rows_decoded"] = counts["rows_in"] - counts["rows_in_error"]
    if bad_frames:
        epath = out + ".errors.parquet"
        pq.write_table(pa.concat_tables(bad_frames), epath)
        counts["errors_file"] = epath
    counts["out"] = out
    return counts


def _error_rows(t: pa.Table, recs: pa.Table, rows: np.ndarray, bad: np.ndarray) -> pa.Table:
    """One row per frame in error: its seq/lsn (when the archive has them), its first
    error text and the whole frame."""
    err = recs.column("error")
    is_err = err.is_valid().to_numpy(zero_copy_only=False)
    first = {}
    for i in np.flatnonzero(is_err):
        first.setdefault(int(rows[i]), err[int(i)].as_py())
    take = pa.array(bad, pa.int64())
    cols = {c: t.column(c).take(take) for c in ("seq", "lsn") if c in t.column_names}
    cols["error"] = pa.array([first[int(b)] for b in bad], pa.string())
    cols["data"] = t.column("data").take(take)
    return pa.table(cols)


def inspect_archive(archive, *, style="b", envelope="auto", payload="data") -> dict:
    """``inspect --source opengauss``: the keys of :func:`pgoutput_codec.cli.inspect.inspect_archive`
    (``messages`` counts records), plus ``frames`` and ``heartbeats``."""
    parts = read_archive_parts(archive)
    by_type = collections.Counter()
    by_table = collections.defaultdict(collections.Counter)
    features = dict.fromkeys(["batches", "origins", "unchanged TOAST"], False)
    lo = {"seq": None, "lsn": None, "xid": None, "commit_ts": None}
    hi = dict(lo)
    n_frames = n_records = n_heartbeats = errors = 0
    first_errors, commit_lsns, commit_keys = [], [], []

    def widen(name, arr):
        arr = pc.drop_null(arr)
        if len(arr):
            mn, mx = (v.as_py() for v in pc.min_max(arr).values())
            lo[name] = mn if lo[name] is None else min(lo[name], mn)
            hi[name] = mx if hi[name] is None else max(hi[name], mx)

    for _, t in iter_archive(parts, payload, on_recaptured=note_recaptured):
        recs, rows, bad = _records(t, style, envelope)
        n_heartbeats += heartbeats(recs)
        types = recs.column("type")
        for v in pc.value_counts(pc.drop_null(types)).to_pylist():
            by_type[v["values"]] += v["counts"]
        if len(bad):
            errors += len(bad)
            err = recs.column("error")
            for i in np.flatnonzero(err.is_valid().to_numpy(zero_copy_only=False)):
                if len(first_errors) >= 5:
                    break
                first_errors.append(f"{archive_row(t, int(rows[i]))}: {err[int(i)].as_py()}")
        iud = pc.fill_null(pc.is_in(types, value_set=pa.array(["I", "U", "D"])), False)
        if pc.any(iud).as_py():
            sub = recs.filter(iud)
            names = pc.binary_join_element_wise(pc.fill_null(sub.column("schema"), "?"),
                                                pc.fill_null(sub.column("table"), "?"), sub.column("type"), "\x00")
            for v in pc.value_counts(names).to_pylist():
                schema, table, op = v["values"].split("\x00")   # no identifier holds a NUL
                by_table[f"{schema}.{table}"][op] += v["counts"]
            features["unchanged TOAST"] |= any(
                pc.any(pc.struct_field(pc.list_flatten(sub.column(side)), "unchanged_toast")).as_py() or False
                for side in ("new_tuple", "old_tuple"))
        is_commit = pc.fill_null(pc.equal(types, "C"), False).to_numpy(zero_copy_only=False)
        if is_commit.any():
            sel = np.flatnonzero(is_commit)
            commit_lsns.append(recs.column("lsn").take(pa.array(sel)).fill_null(0).to_numpy().astype(np.int64))
            commit_keys.append(t.column("seq").take(pa.array(rows[sel])).to_numpy()
                               if "seq" in t.column_names else n_frames + rows[sel])
        if "seq" in t.column_names:
            widen("seq", t.column("seq"))
        widen("lsn", recs.column("lsn"))
        widen("xid", recs.column("xid"))
        widen("commit_ts", commit_timestamps(pc.drop_null(recs.column("commit_time")).to_pylist()))
        features["origins"] |= recs.column("origin_id").null_count != len(recs)
        features["batches"] |= len(rows) > len(np.unique(rows))
        n_frames += len(t)
        n_records += len(recs)
    return {
        "archive": archive, "source": "opengauss", "style": style, "files": len(parts), "frames": n_frames,
        "messages": n_records, "heartbeats": n_heartbeats, "seq": (lo["seq"], hi["seq"]),
        "lsn": tuple(None if v is None else format_lsn(v) for v in (lo["lsn"], hi["lsn"])),
        "xid": (lo["xid"], hi["xid"]), "commit_ts": (lo["commit_ts"], hi["commit_ts"]),
        "by_type": dict(by_type), "type_names": dict(RECORD_TYPES),
        "by_table": {k: dict(c) for k, c in by_table.items()},
        "features": features, "errors": errors, "first_errors": first_errors, "captured_with": None,
        "commits": commit_order(commit_lsns, commit_keys),
    }
