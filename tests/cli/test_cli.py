"""The ``pgoutput-codec`` command on the sample archive: every command, its help, and clean
failures (one line on stderr, non-zero exit, no traceback)."""

from __future__ import annotations

import json
import os
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from clirun import ROOT, SAMPLE, assert_clean_failure, run_cli

import pgoutput_codec as pc
from pgoutput_codec.arrays import plain_list_columns
from pgoutput_codec.cli.inspect import by_table, inspect_archive


# ------------------------------------------------------------------------------ help
@pytest.mark.parametrize("cmd", [[], ["capture"], ["decode"], ["inspect"], ["bench"]])
def test_help(cmd):
    res = run_cli(*cmd, "--help")
    assert res.returncode == 0 and "usage: pgoutput-codec" in res.stdout, res.stderr


def test_console_script_declared():
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["pgoutput-codec"] == "pgoutput_codec.cli:main"


def test_sample_is_package_data():
    import tomllib

    assert os.path.getsize(SAMPLE) < 400_000
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        pkg_data = tomllib.load(f)["tool"]["setuptools"]["package-data"]
    assert "*.parquet" in pkg_data["pgoutput_codec.data"]


# ------------------------------------------------------------------------------ sample archive
def test_inspect_sample():
    res = run_cli("inspect", "--sample")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    for needle in ("2630 messages", "public.customers", "public.events", "I Insert", "StreamStart",
                   "binary values: yes", "streaming: yes", "errors    0",
                   "order     136 commits, commit LSNs rising in arrival order"):
        assert needle in out, out
    js = json.loads(run_cli("inspect", "--sample", "--json").stdout)
    assert js["by_table"]["public.inventory"]["T"] == 1
    assert sum(js["by_type"].values()) == js["messages"] == 2630


def test_inspect_counts_each_relation_that_bore_a_name(tmp_path):
    """A table dropped and created again (tests/table_moves.py) is two relations under
    one name: inspect counts each, where one's counts overwrote the other's."""
    import table_moves as TM
    msgs, _ = TM.messages(TM.SCENARIOS["three_generations"])
    pq.write_table(pa.table({"seq": list(range(len(msgs))), "data": pa.array([pc.encode_message(m) for m in msgs])}),
                   tmp_path / "moves.parquet")
    counts = inspect_archive(str(tmp_path / "moves.parquet"))["by_table"]
    assert counts == {f"public.{TM.NAME} [relation 16500]": {"I": 1},
                        f"public.{TM.NAME} [relation 16600]": {"I": 2, "D": 1},
                        f"public.{TM.NAME} [relation 16700]": {"I": 1, "U": 1}}
    assert by_table({1: {"I": 3}, 2: {"I": 4}}, {1: "public.a", 2: "public.b"}) == {
        "public.a": {"I": 3}, "public.b": {"I": 4}}


def test_decode_sample_messages(tmp_path):
    out = tmp_path / "m.parquet"
    res = run_cli("decode", "--sample", str(out))
    assert res.returncode == 0, res.stderr
    assert "rows in: 2630  rows decoded: 2630  rows in error: 0" in res.stdout
    t = pq.read_table(out)
    src = pq.read_table(SAMPLE)
    assert len(t) == len(src)
    assert t.column("seq").to_pylist() == src.column("seq").to_pylist()
    assert t.column("source_lsn").to_pylist() == src.column("lsn").to_pylist()
    expect = pc.decode_batch(src.column("data"))
    assert t.column("type").to_pylist() == expect.field("type").to_pylist()
    assert t.column("new_tuple").to_pylist() == expect.field("new_tuple").to_pylist()


def test_decode_sample_changes_equals_library(tmp_path):
    out = tmp_path / "c.parquet"
    res = run_cli("decode", "--sample", str(out), "--changes")
    assert res.returncode == 0, res.stderr
    got = pq.read_table(out)
    want = pc.decode_changes(pq.read_table(SAMPLE))
    assert got.equals(plain_list_columns(want).cast(got.schema))
    assert f"change rows written: {len(want)}" in res.stdout
    # table filter
    res = run_cli("decode", "--sample", str(out), "--changes", "--tables", "public.orders")
    assert res.returncode == 0, res.stderr
    assert set(pq.read_table(out).column("table").to_pylist()) == {"orders"}
    # a commit-LSN window: the rows of the transactions committed in it
    from pgoutput_codec.pgoutput.messages import format_lsn
    lsns = sorted(set(want.column("commit_lsn").to_pylist()))
    after, until = lsns[len(lsns) // 3], lsns[2 * len(lsns) // 3]
    res = run_cli("decode", "--sample", str(out), "--changes", "--after-lsn", str(after), "--until-lsn",
                  format_lsn(until))
    assert res.returncode == 0, res.stderr
    got = pq.read_table(out).column("commit_lsn").to_pylist()
    assert got and all(after < v <= until for v in got)
    assert len(got) == sum(after < v <= until for v in want.column("commit_lsn").to_pylist())


def test_decode_changes_incremental_with_a_checkpoint_file(tmp_path):
    """A growing archive directory decoded day by day with --checkpoint: each run reads only
    the files from the checkpoint's seq on, the days' outputs together are the whole
    archive's changes, and a run with nothing new gives nothing."""
    src = pq.read_table(SAMPLE).replace_schema_metadata(None)
    want = pc.decode_changes(src)
    d, cp = tmp_path / "arch", tmp_path / "state" / "cp.json"
    d.mkdir()
    cp.parent.mkdir()
    cuts = [0, 700, 1400, 2000, len(src)]
    got, start, held = [], 0, 0
    for day, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False)):
        pq.write_table(src.slice(a, b - a), d / f"part-{day:06d}.parquet")
        out = tmp_path / f"day{day}.parquet"
        res = run_cli("decode", str(d), str(out), "--changes", "--checkpoint", str(cp))
        assert res.returncode == 0, res.stderr
        got.append(pq.read_table(out))
        assert f"rows in: {b - start} " in res.stdout        # only the rows from the checkpoint on
        state = json.loads(cp.read_text())
        assert f"reads from seq {state['from_key']}" in res.stdout
        start, held = state["from_key"], held + len(state["held_by"])
    whole = pa.concat_tables(got)
    assert whole.equals(plain_list_columns(want).cast(whole.schema)), (len(whole), len(want))
    assert held >= 2                             # the sample's big streamed transaction spans days
    assert state["held_by"] == [] and state["from_key"] == src.column("seq")[-1].as_py() + 1
    res = run_cli("decode", str(d), str(tmp_path / "again.parquet"), "--changes", "--checkpoint", str(cp))
    assert res.returncode == 0 and pq.read_table(tmp_path / "again.parquet").num_rows == 0, res.stderr
    assert "change rows written: 0" in res.stdout and f"{len(cuts) - 1} file(s) before" in res.stdout
    assert json.loads(cp.read_text()) == state
    cp.write_text("{not json")
    assert_clean_failure(run_cli("decode", str(d), str(out), "--changes", "--checkpoint", str(cp)),
                         "not a checkpoint")
    assert_clean_failure(run_cli("decode", str(d), str(out), "--checkpoint", str(cp)), "--checkpoint needs --changes")


def test_decode_directory_in_seq_order(tmp_path):
    """A directory of files whose names do not sort in seq order: decoded in seq order."""
    src = pq.read_table(SAMPLE).replace_schema_metadata(None)
    d = tmp_path / "arch"
    d.mkdir()
    cuts = [0, 900, 1800, len(src)]
    for k, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False)):
        pq.write_table(src.slice(a, b - a), d / f"{'zyx'[k]}.parquet")
    out = tmp_path / "c.parquet"
    res = run_cli("decode", str(d), str(out), "--changes")
    assert res.returncode == 0, res.stderr
    want = pc.decode_changes(pq.read_table(SAMPLE))
    got = pq.read_table(out)
    assert got.column("seq").to_pylist() == want.column("seq").to_pylist()
    assert got.column("after").to_pylist() == want.column("after").to_pylist()


def test_decode_changes_gives_transactions_received_again_once(tmp_path):
    """An archive written by a consumer that reconnected before confirming (no capture
    metadata to tell): the second file starts with the first file's last transactions
    again. They are given once and counted; --replays keep gives them twice; the files
    the other way round are refused as out of order, in one line."""
    src = pq.read_table(SAMPLE).replace_schema_metadata(None)
    data = src.column("data").to_pylist()
    cut = max(i for i in range(1200) if data[i][:1] == b"C")
    begins = [i for i in range(cut) if data[i][:1] == b"B"]
    again = src.slice(begins[-3])          # the first file's last three transactions, then the rest
    again = again.set_column(0, "seq", pa.array(range(cut + 1, cut + 1 + len(again)), pa.int64()))
    d = tmp_path / "arch"
    d.mkdir()
    pq.write_table(src.slice(0, cut + 1), d / "part-0.parquet")
    pq.write_table(again.slice(0, cut + 1 - begins[-3]), d / "part-1.parquet")
    pq.write_table(again.slice(cut + 1 - begins[-3]), d / "part-2.parquet")
    out = tmp_path / "c.parquet"
    res = run_cli("decode", str(d), str(out), "--changes")
    assert res.returncode == 0, res.stderr
    assert "3 transaction(s) received again" in res.stdout
    want = pc.decode_changes(src)
    got = pq.read_table(out)
    assert got.column("after").to_pylist() == want.column("after").to_pylist()
    res = run_cli("inspect", str(d))                  # inspect says so before any decoding
    assert res.returncode == 0 and "3 received again (replays, given once; seq " in res.stdout, res.stdout
    js = json.loads(run_cli("inspect", str(d), "--json").stdout)["commits"]
    c_seq = [s for s in range(begins[-3], cut + 1) if data[s][:1] == b"C"]
    assert js["replayed"] == [cut + 1 + s - begins[-3] for s in c_seq] and js["out_of_order"] is None
    res = run_cli("decode", str(d), str(out), "--changes", "--replays", "keep")
    assert res.returncode == 0 and "received again" not in res.stdout, res.stderr
    assert pq.read_table(out).num_rows > len(want)
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    pq.write_table(src.slice(cut + 1).drop_columns(["seq"]), swapped / "a.parquet")
    pq.write_table(src.slice(0, cut + 1).drop_columns(["seq"]), swapped / "b.parquet")
    assert_clean_failure(run_cli("decode", str(swapped), str(out), "--changes"), "not in arrival order")
    first_c = next(i for i in range(len(data)) if data[i][:1] == b"C")
    res = run_cli("inspect", str(swapped))
    assert f"OUT OF ORDER from seq {len(src) - cut - 1 + first_c} " in res.stdout, res.stdout
    assert_clean_failure(run_cli("decode", "--sample", str(out), "--replays", "keep"), "--replays needs --changes")


def test_decode_csv_export(tmp_path):
    """CSV (``\\copy ... csv header``) and COPY text (tab, no header, doubled backslash)."""
    src = pq.read_table(SAMPLE)
    rows = list(zip(src.column("lsn").to_pylist(), src.column("xid").to_pylist(),
                    src.column("data").to_pylist(), strict=True))
    csv = tmp_path / "x.csv"
    csv.write_text("lsn,xid,data\n" + "".join(f"{a},{b},\\x{c.hex()}\n" for a, b, c in rows))
    copy = tmp_path / "x.copy"
    copy.write_text("".join(f"{a}\t{b}\t\\\\x{c.hex()}\n" for a, b, c in rows))
    want = pc.decode_changes(src.select(["lsn", "data"]))
    for f in (csv, copy):
        out = tmp_path / (f.name + ".parquet")
        res = run_cli("decode", str(f), str(out), "--changes")
        assert res.returncode == 0, res.stderr
        got = pq.read_table(out)
        assert len(got) == len(want)
        assert got.column("after").to_pylist() == want.column("after").to_pylist()
        assert got.column("lsn").to_pylist() == want.column("lsn").to_pylist()


def test_a_csv_value_that_is_not_hex_is_an_error_row_saying_so(tmp_path):
    """A CSV export's data value that is not bytea hex is an error row whose text says
    so, in message decoding, change decoding and the CLI alike, and the counts add up."""
    from pgoutput_codec.archive import HEX_ERROR, read_archive_parts
    from pgoutput_codec import ChangeDecoder
    src = pq.read_table(SAMPLE).slice(0, 40)
    rows = [f"{a},{b},\\x{c.hex()}" for a, b, c in zip(src.column("lsn").to_pylist(), src.column("xid").to_pylist(),
                                                         src.column("data").to_pylist(), strict=True)]
    rows[7] = rows[7].rsplit(",", 1)[0] + ",\\xZZ"
    csv = tmp_path / "x.csv"
    csv.write_text("lsn,xid,data\n" + "\n".join(rows) + "\n")
    table = read_archive_parts(str(csv))[0].read()
    assert table.column("payload_error").to_pylist() == [None] * 7 + [HEX_ERROR] + [None] * 32
    dec = ChangeDecoder(errors="collect")
    dec.feed(table)
    assert [e["error"] for e in dec.errors] == [HEX_ERROR]
    assert dec.counts["rows_in"] == dec.counts["rows_decoded"] + dec.counts["rows_in_error"] == 40
    out = tmp_path / "m.parquet"
    res = run_cli("decode", str(csv), str(out), "--mode", "PERMISSIVE")
    assert res.returncode == 0, res.stderr
    errors = pq.read_table(out).column("error").to_pylist()
    assert errors[7] == HEX_ERROR and errors.count(None) == 39
    assert_clean_failure(run_cli("decode", str(csv), str(out)), "not bytea hex")


@pytest.mark.parametrize("lsn", ["0o1", "0/1x", "-1/0", "1_0/0", " 1/0", "100000000/0", "0/0\x00"])
def test_a_csv_lsn_that_is_not_an_lsn_names_the_file_and_row(tmp_path, lsn):
    """The server writes X/Y (1 to 8 hex digits each): anything else in an export's lsn
    column is a broken export, named with its row, and parse_lsn refuses it too (int()
    alone took a sign, spaces, '_', and a high part past 32 bits)."""
    from pgoutput_codec.archive import ArchiveError, read_archive_parts
    csv = tmp_path / "x.csv"
    csv.write_text(f"lsn,xid,data\n0/16,5,\\x42\n{lsn},5,\\x42\n")
    with pytest.raises(ArchiveError, match=f"x.csv: data row 2: lsn {re.escape(repr(lsn))} is not an LSN"):
        read_archive_parts(str(csv))[0].read()
    with pytest.raises(ValueError, match="not an LSN"):
        pc.parse_lsn(lsn)
    assert pc.parse_lsn("ffffffff/0") == 0xFFFFFFFF << 32 and pc.parse_lsn("0/1a") == 26


@pytest.mark.parametrize("header", ["lsn,xid,data,data", "data,lsn,lsn", "xid,data,xid"])
def test_a_csv_header_naming_a_column_twice_is_refused(tmp_path, header):
    """An export whose header names data, lsn or xid twice has no one column to read: it
    is refused naming the file and the column, never a KeyError."""
    from pgoutput_codec.archive import ArchiveError, read_archive_parts
    csv = tmp_path / "x.csv"
    csv.write_text(header + "\n" + ",".join(["\\x42"] * len(header.split(","))) + "\n")
    with pytest.raises(ArchiveError, match="x.csv: the CSV header names column '(data|lsn|xid)' more than once"):
        read_archive_parts(str(csv))[0].read()


def test_modes_on_a_malformed_row(tmp_path):
    src = pq.read_table(SAMPLE)
    data = src.column("data").to_pylist()
    i = next(k for k, d in enumerate(data) if d[:1] == b"I")
    data[i] = data[i][:7]                       # truncated Insert
    bad = tmp_path / "bad.parquet"
    pq.write_table(src.set_column(src.column_names.index("data"), "data", pa.array(data, pa.binary())), bad)
    out = tmp_path / "o.parquet"
    res = run_cli("decode", str(bad), str(out))
    assert_clean_failure(res, "malformed payload", f"seq {i}", "Insert ('I')")
    assert not out.exists()
    res = run_cli("decode", str(bad), str(out), "--mode", "PERMISSIVE")
    assert res.returncode == 0 and "rows in error: 1" in res.stdout, res
    t = pq.read_table(out)
    assert len(t) == len(src) and t.column("error").null_count == len(src) - 1
    res = run_cli("decode", str(bad), str(out), "--mode", "dropmalformed")
    assert res.returncode == 0 and len(pq.read_table(out)) == len(src) - 1
    res = run_cli("decode", str(bad), str(out), "--changes")
    assert_clean_failure(res, f"seq {i}")
    res = run_cli("decode", str(bad), str(out), "--changes", "--mode", "PERMISSIVE")
    assert res.returncode == 0 and "rows in error: 1" in res.stdout, res
    assert os.path.exists(str(out) + ".errors.parquet")
    res = run_cli("inspect", str(bad))
    assert res.returncode == 0 and "errors    1" in res.stdout


def test_permissive_lists_a_transaction_whose_commit_did_not_decode(tmp_path):
    """decode --changes --mode PERMISSIVE: a Commit cut short is a row in error, and the
    transaction it would have ended, dropped at the next Begin, is listed in the errors
    file under that Begin's seq, beside it; its rows are not given."""
    src = pq.read_table(SAMPLE)
    data = src.column("data").to_pylist()
    c = next(k for k, d in enumerate(data) if d[:1] == b"C" and any(x[:1] == b"I" for x in data[:k]))
    b = next(k for k in range(c, len(data)) if data[k][:1] == b"B")
    data[c] = data[c][:9]                       # the Commit cut short
    bad = tmp_path / "bad.parquet"
    pq.write_table(src.set_column(src.column_names.index("data"), "data", pa.array(data, pa.binary())), bad)
    out = tmp_path / "o.parquet"
    res = run_cli("decode", str(bad), str(out), "--changes", "--mode", "PERMISSIVE")
    assert res.returncode == 0 and "rows in error: 1" in res.stdout, res
    errors = pq.read_table(str(out) + ".errors.parquet").to_pylist()
    seqs = src.column("seq").to_pylist()
    assert [e["seq"] for e in errors] == [seqs[c], seqs[b]]
    assert "Commit" in errors[0]["error"] and "has no end" in errors[1]["error"], errors


# ------------------------------------------------------------------------------ clean failures
@pytest.fixture()
def bad_files(tmp_path):
    notarch = tmp_path / "notes.txt"
    notarch.write_text("hello\nthis is not an archive\n")
    corrupt = tmp_path / "corrupt.parquet"
    raw = open(SAMPLE, "rb").read()
    corrupt.write_bytes(raw[:4] + bytes(len(raw) // 2) + raw[-8:])   # magic kept, body zeroed
    truncated = tmp_path / "trunc.parquet"
    truncated.write_bytes(raw[: len(raw) // 3])
    wrongcols = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), wrongcols)
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    return dict(missing=str(tmp_path / "nope.parquet"), notarch=str(notarch), corrupt=str(corrupt),
                truncated=str(truncated), wrongcols=str(wrongcols), empty_dir=str(empty_dir))


@pytest.mark.parametrize("which,needle", [
    ("missing", "no such file"), ("notarch", "not an archive"), ("corrupt", "Parquet"),
    ("truncated", "Parquet"), ("wrongcols", "no 'data' column"), ("empty_dir", "no Parquet files"),
])
@pytest.mark.parametrize("cmd", ["inspect", "decode", "decode-changes"])
def test_clean_failures(bad_files, tmp_path, which, needle, cmd):
    path = bad_files[which]
    if cmd == "inspect":
        res = run_cli("inspect", path)
    else:
        res = run_cli("decode", path, str(tmp_path / "out.parquet"), *(["--changes"] if cmd != "decode" else []))
    assert_clean_failure(res, needle)


@pytest.mark.parametrize("args,needle", [
    (["frobnicate"], "invalid choice"),
    (["decode", "--sample", "o.parquet", "--mode", "LENIENT"], "invalid choice"),
    (["decode", "--sample", "o.parquet", "--tables", "public.t"], "--tables needs --changes"),
    (["decode", "--sample", "o.parquet", "--after-lsn", "0/10"], "--after-lsn needs --changes"),
    (["decode", "--sample", "o.parquet", "--changes", "--until-lsn", "yesterday"], "not an LSN"),
    (["decode", "--sample", "o.parquet", "--changes", "--after-lsn", "0/20", "--until-lsn", "0/10"],
     "before after_lsn"),
    (["decode", "x"], "ARCHIVE is required"),
    (["inspect"], "ARCHIVE is required"),
    (["inspect", "--sample", "x.parquet"], "either ARCHIVE or --sample"),
    (["capture", "--slot", "s"], "required"),
    (["capture", "--dsn", "host=/nonexistent port=1", "--slot", "s", "--publication", "p", "--out", "{tmp}"],
     "cannot connect"),
    (["capture", "--dsn", "x", "--slot", "s", "--publication", "p", "--out", "{tmp}", "--streaming"],
     "--streaming needs --proto 2"),
    (["bench", "nosuch"], "no such benchmark"),
    ([], "a command is required"),
])
def test_bad_arguments(tmp_path, args, needle):
    res = run_cli(*[a.replace("{tmp}", str(tmp_path / "arch")) for a in args])
    assert_clean_failure(res, needle)


def test_bench_quick():
    res = run_cli("bench", "convert", "--quick")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "== convert_bench.py" in res.stdout and "values/s" in res.stdout
