"""``pgoutput-codec decode``/``inspect --source opengauss``: archives of openGauss frames
(Parquet files, a CSV export) give the rows the library's openGauss decoders give, and
count every frame: rows in = rows decoded + rows in error."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pgoutput_codec import cli
from pgoutput_codec.opengauss import Column, Record, decode_batch
from pgoutput_codec.opengauss.changes import decode_changes
from pgoutput_codec.opengauss.encode import encode_frame, encode_heartbeat, encode_text_frame

TS = "2024-02-05 14:46:35.203057+08"


def _cols(i, v=None, key_only=False, style="b"):
    """'b' frames send type OIDs, the text styles type names."""
    types = [(23, None), (25, None)] if style == "b" else [(None, "integer"), (None, "text")]
    cols = (Column("id", *types[0][:1], str(i).encode(), *types[0][1:]),
            Column("v", *types[1][:1], None if v is None else v.encode(), *types[1][1:]))
    return cols[:1] if key_only else cols


def transactions(style="b"):
    """Seven transactions on two tables: inserts, a key change, a delete; lsn rising."""
    out, lsn = [], 1000
    for x in range(7):
        recs = [Record("B", lsn, csn=x + 1, first_lsn=lsn, xid=500 + x, commit_time=TS)]
        table = "t" if x % 3 else "u"
        recs += [Record("I", lsn + 1 + k, schema="public", table=table, new_tuple=_cols(10 * x + k, f"v{k}", style=style))
                 for k in range(3)]
        if x == 4:
            recs.append(Record("U", lsn + 5, schema="public", table="t", new_tuple=_cols(99, "moved", style=style),
                               old_tuple=_cols(40, key_only=True, style=style)))
        if x == 5:
            recs.append(Record("D", lsn + 5, schema="public", table="t", old_tuple=_cols(41, key_only=True, style=style)))
        recs.append(Record("C", lsn + 9, xid=500 + x, commit_time=TS))
        out.append(recs)
        lsn += 100
    return out


def frames(style="b"):
    if style == "b":
        return [encode_frame(t) for t in transactions()]
    return [encode_text_frame(t, style=style) for t in transactions(style)]


def write_archive(directory, values, per_file=3, seq=True):
    """``values`` as ``capture`` lays out an archive: part files with seq, lsn, xid, data
    (``seq=False``: without seq, the files in name order)."""
    directory.mkdir(exist_ok=True)
    for f, start in enumerate(range(0, len(values), per_file)):
        chunk = values[start:start + per_file]
        keys = list(range(start, start + len(chunk)))
        pq.write_table(pa.table({"seq": pa.array(keys, pa.int64()), "lsn": [f"0/{k:X}" for k in keys],
                                 "xid": pa.array([None] * len(chunk), pa.int64()),
                                 "data": pa.array(chunk, pa.binary())}).drop_columns([] if seq else ["seq"]),
                       directory / f"part-{f:06d}.parquet")
    return str(directory)


def run(capsys, *args):
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def counts(out):
    """(rows in, rows decoded, rows in error) of decode's last line."""
    words = out.split()
    return tuple(int(words[words.index(k) + 1]) for k in ("in:", "decoded:", "error:"))


@pytest.mark.parametrize("style", ["b", "t", "j"])
def test_decode_records_equal_the_library(tmp_path, capsys, style):
    values = frames(style)
    if style == "b":
        values.insert(2, encode_frame([encode_heartbeat(1150)]))   # a frame of one heartbeat: no record rows
    arch = write_archive(tmp_path / "arch", values)
    out = tmp_path / "recs.parquet"
    code, text, err = run(capsys, "decode", arch, str(out), "--source", "opengauss", "--style", style)
    assert code == 0, err
    assert counts(text) == (len(values), len(values), 0)
    got = pq.read_table(out)
    want = decode_batch(pa.array(values, pa.binary()), style)
    assert got.drop_columns(["seq", "source_lsn", "source_xid", "record"]).equals(want.drop_columns(["row"]))
    rows = want.column("row").to_numpy()
    assert got.column("seq").to_pylist() == rows.tolist()            # the frame's own seq: row i has seq i
    assert got.column("source_lsn").to_pylist() == [f"0/{r:X}" for r in rows]
    first = {r: i for i, r in reversed(list(enumerate(rows.tolist())))}
    assert got.column("record").to_pylist() == [i - first[r] for i, r in enumerate(rows.tolist())]
    if style == "b":
        assert "1 heartbeat record(s) skipped" in text


def test_decode_changes_equal_the_library(tmp_path, capsys):
    values = frames()
    arch = write_archive(tmp_path / "arch", values)
    out = tmp_path / "ch.parquet"
    all_values = pa.array(values, pa.binary())
    for extra, kw in [((), {}), (("--tables", "public.t"), {"tables": "public.t"}),
                      (("--after-lsn", "0/400"), {"after_lsn": "0/400"}),
                      (("--keys", "public.t(id)"), {"keys": "public.t(id)"})]:
        code, text, err = run(capsys, "decode", arch, str(out), "--source", "opengauss", "--changes", *extra)
        assert code == 0, err
        want = decode_changes(all_values, **kw)
        got = pq.read_table(out)
        assert got.equals(want), extra
        assert counts(text) == (len(values), len(values), 0)
        assert f"change rows written: {len(want)}" in text
    assert pq.read_table(out).column("op").to_pylist().count("U") == 1


def test_a_transaction_received_again_is_given_once(tmp_path, capsys):
    values = frames()
    arch = write_archive(tmp_path / "arch", values + values[3:5])
    out = tmp_path / "ch.parquet"
    code, text, err = run(capsys, "decode", arch, str(out), "--source", "opengauss", "--changes")
    assert code == 0, err
    assert pq.read_table(out).equals(decode_changes(pa.array(values, pa.binary())))
    assert "2 transaction(s) received again" in text
    for where in (arch, write_archive(tmp_path / "noseq", values + values[3:5], seq=False)):
        code, text, _ = run(capsys, "inspect", where, "--source", "opengauss")
        assert code == 0 and "2 received again (replays, given once; seq 7, 8)" in text, text   # the archive's rows


def test_modes_on_a_malformed_frame(tmp_path, capsys):
    values = frames()
    values[4] = values[4][:-5]                      # its Commit record cut short
    arch = write_archive(tmp_path / "arch", values)
    out = tmp_path / "o.parquet"
    code, _, err = run(capsys, "decode", arch, str(out), "--source", "opengauss")
    assert code == 1 and err.count("\n") == 1 and "malformed openGauss frame at archive seq 4, lsn 0/4" in err, err
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))   # the first file's records were written
    good = decode_batch(pa.array(values, pa.binary()))
    n_good = good.column("error").null_count
    for mode in ("PERMISSIVE", "DROPMALFORMED"):
        code, text, err = run(capsys, "decode", arch, str(out), "--source", "opengauss", "--mode", mode)
        assert code == 0, err
        assert counts(text) == (len(values), len(values) - 1, 1)
        t = pq.read_table(out)
        errors = len(t) - t.column("error").null_count
        assert errors == (len(good) - n_good if mode == "PERMISSIVE" else 0)
        assert len(t) - errors == n_good      # every good record, the bad frame's too
    code, text, err = run(capsys, "decode", arch, str(out), "--source", "opengauss", "--changes", "--mode", "permissive")
    assert code == 0 and counts(text) == (len(values), len(values) - 1, 1), err
    assert pq.read_table(out).equals(decode_changes(pa.array(values, pa.binary()), errors="drop"))
    bad = pq.read_table(str(out) + ".errors.parquet")
    assert bad.column("seq").to_pylist() == [4] and bad.column("data").to_pylist() == [values[4]]
    assert "Commit" in bad.column("error")[0].as_py()
    code, _, err = run(capsys, "decode", arch, str(out), "--source", "opengauss", "--changes")
    assert code == 1 and "seq 4" in err
    code, text, _ = run(capsys, "inspect", arch, "--source", "opengauss")
    assert code == 0 and "errors    1" in text and "seq 4, lsn 0/4:" in text


def test_inspect(tmp_path, capsys):
    values = frames()
    arch = write_archive(tmp_path / "arch", values)
    code, text, err = run(capsys, "inspect", arch, "--source", "opengauss")
    assert code == 0, err
    for needle in ("(3 files, 7 openGauss 'b' frames, 37 records, 0 heartbeats skipped)", "record type",
                   "I Insert", "C Commit", "seq       0 .. 6", "xid       500 .. 506",
                   "order     7 commits, commit LSNs rising in arrival order", "errors    0", "batches: yes"):
        assert needle in text, (needle, text)
    code, text, _ = run(capsys, "inspect", arch, "--source", "opengauss", "--json")
    r = json.loads(text)
    assert r["by_table"] == {"public.u": {"I": 9}, "public.t": {"I": 12, "U": 1, "D": 1}}
    assert sum(r["by_type"].values()) == r["messages"] == len(decode_batch(pa.array(values, pa.binary())))
    assert r["lsn"] == ["0/3E8", "0/649"]   # the first Begin, the last Commit
    assert r["commit_ts"][0].startswith("2024-02-05 06:46:35")


def test_csv_export(tmp_path, capsys):
    values = frames()
    csv = tmp_path / "x.csv"
    csv.write_text("lsn,xid,data\n" + "".join(f"0/{i:X},{500 + i},\\x{v.hex()}\n" for i, v in enumerate(values)))
    out = tmp_path / "ch.parquet"
    code, _, err = run(capsys, "decode", str(csv), str(out), "--source", "opengauss", "--changes")
    assert code == 0, err
    assert pq.read_table(out).equals(decode_changes(pa.array(values, pa.binary())))


def test_empty_archive(tmp_path, capsys):
    arch = tmp_path / "arch"
    arch.mkdir()
    pq.write_table(pa.table({"seq": pa.array([], pa.int64()), "data": pa.array([], pa.binary())}),
                   arch / "part-000000.parquet")
    for extra in ((), ("--changes",)):
        out = tmp_path / f"o{len(extra)}.parquet"
        code, text, err = run(capsys, "decode", str(arch), str(out), "--source", "opengauss", *extra)
        assert code == 0 and counts(text) == (0, 0, 0), err
        assert len(pq.read_table(out)) == 0


@pytest.mark.parametrize("args,needle", [
    (["decode", "{arch}", "o.parquet", "--style", "t"], "--style needs --source opengauss"),
    (["decode", "{arch}", "o.parquet", "--keys", "public.t(id)"], "--keys needs --source opengauss"),
    (["decode", "{arch}", "o.parquet", "--source", "opengauss", "--keys", "public.t(id)"], "--keys needs --changes"),
    (["decode", "{arch}", "o.parquet", "--source", "opengauss", "--changes", "--checkpoint", "c.json"],
     "--checkpoint is for pgoutput archives"),
    (["inspect", "{arch}", "--style", "j"], "--style needs --source opengauss"),
    (["decode", "{arch}", "o.parquet", "--source", "opengauss", "--style", "x"], "invalid choice"),
    (["inspect", "--sample", "--source", "opengauss"], "--sample takes no --source opengauss"),
])
def test_bad_arguments(tmp_path, capsys, args, needle):
    arch = write_archive(tmp_path / "arch", frames())
    with pytest.raises(SystemExit) if "invalid choice" in needle else contextlib.nullcontext():
        code = cli.main([a.replace("{arch}", arch) for a in args])
        assert code == 1
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err


def test_frame_rows_keep_their_order_key_in_a_file_out_of_seq_order(tmp_path, capsys):
    """A file whose rows are not in seq order is read in seq order (as for pgoutput)."""
    values = frames()
    order = np.array([2, 0, 1, 4, 3, 6, 5])
    arch = tmp_path / "arch"
    arch.mkdir()
    pq.write_table(pa.table({"seq": pa.array(order, pa.int64()),
                             "data": pa.array([values[i] for i in order], pa.binary())}), arch / "part-000000.parquet")
    out = tmp_path / "ch.parquet"
    code, _, err = run(capsys, "decode", str(arch), str(out), "--source", "opengauss", "--changes")
    assert code == 0, err
    assert pq.read_table(out).equals(decode_changes(pa.array(values, pa.binary())))


def test_large_binary_payload_column(tmp_path, capsys):
    values = frames()
    arch = tmp_path / "arch"
    arch.mkdir()
    pq.write_table(pa.table({"seq": pa.array(range(len(values)), pa.int64()),
                             "data": pa.array(values, pa.large_binary())}), arch / "part-000000.parquet")
    for extra, want in (((), decode_batch(pa.array(values, pa.binary())).drop_columns(["row"])),
                        (("--changes",), decode_changes(pa.array(values, pa.binary())))):
        out = tmp_path / f"o{len(extra)}.parquet"
        code, _, err = run(capsys, "decode", str(arch), str(out), "--source", "opengauss", *extra)
        assert code == 0, err
        got = pq.read_table(out)
        assert got.select(want.column_names).equals(want)
