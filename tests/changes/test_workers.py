"""Decoding in pieces on several threads gives what one thread gives, row for row.

Every archive of the committed real-server corpus (PostgreSQL 15, 16 and 18, protocols
1–4: streamed, two-phase, binary) is cut into pieces of a few rows, so that cuts fall
inside stream blocks and transactions; the same archives with bytes damaged check the
rows in error and the exceptions."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pgoutput_codec import PgoutputCodecError, decode_batch, decode_changes, decode_table_changes, threads
from pgoutput_codec.arrays import payload_sizes
from pgoutput_codec.pgoutput.batch import decode_batch_rows, decode_batch_with_state
from pgoutput_codec.changes.parallel import changes_by_pieces

from arrow_values import values_equal

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "corpus.parquet")


def _archives():
    t = pq.read_table(CORPUS)
    out = {}
    for key in sorted(set(zip(t.column("server_version").to_pylist(), t.column("option_set").to_pylist(),
                              strict=True))):
        mask = pc.and_(pc.equal(t.column("server_version"), key[0]), pc.equal(t.column("option_set"), key[1]))
        out[f"pg{key[0]}-{key[1]}"] = t.filter(mask).select(["seq", "lsn", "xid", "data"])
    return out


ARCHIVES = _archives()


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch):
    """Pieces of a few rows: a corpus archive is a few hundred."""
    monkeypatch.setattr(threads, "MIN_PIECE_ROWS", 7)
    monkeypatch.setattr(threads, "PIECE_BYTES", 300)
    monkeypatch.setattr(threads, "HELD_PIECE_BYTES", 300)


def test_archives_are_cut_in_many_pieces():
    assert len(ARCHIVES) >= 12
    for arch in ARCHIVES.values():
        values = arch.column("data").combine_chunks()
        assert len(threads.piece_bounds(payload_sizes(values), 3)) > 10


@pytest.mark.parametrize("name", sorted(ARCHIVES))
def test_messages_in_pieces(name):
    values = ARCHIVES[name].column("data")
    for in_stream in (None, False, True):
        want, want_state = decode_batch_with_state(values, in_stream=in_stream, workers=1)
        got, got_state = decode_batch_with_state(values, in_stream=in_stream, workers=3)
        assert got.equals(want) and got_state == want_state
    # every row in its own stream state: the plan's executors
    states = np.random.default_rng(7).integers(0, 2, len(values)).astype(bool)
    assert decode_batch_rows(values, states, workers=3).equals(decode_batch_rows(values, states, workers=1))


OPTIONS = [{"errors": "collect"}, {"tables": "public.*"}, {"include_xids": False, "include_origin": False}]


@pytest.mark.parametrize("name", sorted(ARCHIVES))
def test_changes_in_pieces(name):
    arch = ARCHIVES[name]
    # the options by turns: each archive with the defaults and one other set
    other = OPTIONS[sorted(ARCHIVES).index(name) % len(OPTIONS)]
    for options in ({}, other):
        want = decode_changes(arch, workers=1, **options)
        got = changes_by_pieces(arch, 3, options)
        assert got is not None, "the archive should be decoded by pieces"
        assert got.equals(want)
    assert decode_changes(arch, workers=3, **other).equals(want)
    # a commit-LSN window: the middle third of the commits
    commits = decode_changes(arch, workers=1).column("commit_lsn").to_numpy()
    lo, hi = int(np.quantile(commits, 0.33)), int(np.quantile(commits, 0.66))
    want = decode_changes(arch, workers=1, after_lsn=lo, until_lsn=hi)
    got = changes_by_pieces(arch, 2, {"after_lsn": lo, "until_lsn": hi})
    assert got is not None and got.equals(want) and 0 < len(want) < len(commits)


@pytest.mark.parametrize("name", sorted(ARCHIVES))
def test_typed_tables_on_threads(name):
    """``decode_table_changes``: messages decoded in pieces, columns converted in groups."""
    arch = ARCHIVES[name]
    changes = decode_changes(arch, workers=1)
    tables = sorted(set(zip(changes.column("schema").to_pylist(), changes.column("table").to_pylist(),
                            strict=True)))
    assert tables
    for schema, table in tables:
        want = decode_table_changes(arch, f"{schema}.{table}", workers=1)
        got = decode_table_changes(arch, f"{schema}.{table}", workers=3)
        assert got.schema == want.schema
        for col in want.column_names:        # (NaN values: equal to themselves here)
            assert values_equal(got.column(col), want.column(col)), (schema, table, col)


def _damaged(arch: pa.Table, seed: int) -> pa.Table:
    """``arch`` with a byte of a few payloads changed, a few truncated."""
    rng = np.random.default_rng(seed)
    rows = arch.column("data").to_pylist()
    for i in rng.choice(len(rows), 6, replace=False):
        b = bytearray(rows[i])
        if rng.random() < 0.5 and len(b) > 1:
            b = b[:int(rng.integers(1, len(b)))]
        else:
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        rows[i] = bytes(b)
    return arch.set_column(arch.column_names.index("data"), "data", pa.array(rows, pa.binary()))


@pytest.mark.parametrize("name", sorted(ARCHIVES))
def test_damaged_archives_in_pieces(name):
    for seed in range(1):
        arch = _damaged(ARCHIVES[name], seed + sorted(ARCHIVES).index(name))
        assert decode_batch(arch.column("data"), workers=3).equals(decode_batch(arch.column("data"), workers=1))
        try:
            want = decode_changes(arch, workers=1, errors="collect")
        except PgoutputCodecError as e:
            with pytest.raises(type(e)) as got:
                decode_changes(arch, workers=3, errors="collect")
            assert str(got.value) == str(e)
        else:
            assert decode_changes(arch, workers=3, errors="collect").equals(want)
        try:
            decode_changes(arch, workers=1)
        except PgoutputCodecError as e:
            with pytest.raises(type(e)) as got:
                decode_changes(arch, workers=3)
            assert str(got.value) == str(e)
        else:
            assert decode_changes(arch, workers=3).equals(decode_changes(arch, workers=1))


def test_workers_must_be_a_count():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="workers"):
            decode_batch([b"B"], workers=bad)
    assert threads.worker_count(None) >= 1
