"""Conformance against real PostgreSQL 15, 16 and 18 servers (the project's ground truth).

Each server runs the scenario catalog (``scenarios.py``); every payload the server emitted
for every option set it accepts must decode (``decode_message`` and ``decode_batch``),
re-encode byte for byte, and agree with the server's own view: the SQL function's
lsn/xid columns, ``pg_class``/``pg_attribute``/``pg_type``, ``col::text`` and the types'
send functions, and the final table contents (a replay of the decoded changes).
"""

from __future__ import annotations

import collections

import pyarrow as pa
import pytest

import checks
import scenarios
from pgoutput_codec.pgoutput.messages import datetime_to_pg_timestamp, parse_lsn

OPTS = {o.name: o for o in scenarios.OPTION_SETS}
_DECODED = {}


def decoded_rows(cap, optname):
    if optname not in cap.rows:
        opt = OPTS[optname]
        pytest.skip(f"PG{cap.major} refuses {optname} (needs PG{opt.min_major}+): {cap.refused.get(optname)}")
    key = (id(cap), optname)
    if key not in _DECODED:
        from pgoutput_codec import decode_message

        _DECODED[key] = (cap, checks.decode_rows(cap.rows[optname], decode_message))  # cap kept alive
    return _DECODED[key][1]


optsets = pytest.mark.parametrize("optname", list(OPTS))


def test_option_sets_accepted_or_refused(capture):
    for opt in scenarios.OPTION_SETS:
        if capture.major >= opt.min_major:
            assert opt.name in capture.rows, f"PG{capture.major} should accept {opt.name}"
        else:
            assert opt.name in capture.refused, f"PG{capture.major} should refuse {opt.name}"


@optsets
def test_decode_and_reencode_byte_exact(capture, optname):
    from pgoutput_codec import encode_message

    rows = decoded_rows(capture, optname)
    assert rows, "the server sent nothing"
    counts = collections.Counter()
    bad = []
    for r in rows:
        again = encode_message(r.msg)
        if again != r.data:
            bad.append(f"row {r.seq} {r.msg.type}: {r.data.hex()} re-encoded as {again.hex()}")
        else:
            counts[r.msg.type] += 1
    checks.ROUNDTRIP_COUNTS[(capture.label, optname)] = counts
    assert not bad, "\n".join(bad[:10])


@optsets
def test_stateless_decode_agrees(capture, optname):
    """``in_stream=None`` must find the same reading (or say it is ambiguous), never another."""
    from pgoutput_codec import AmbiguousMessageError, decode_message

    bad = []
    for r in decoded_rows(capture, optname):
        try:
            msg = decode_message(r.data)
        except AmbiguousMessageError:
            continue
        if msg != r.msg:
            bad.append(f"row {r.seq}: in_stream=None gave {msg!r}, stream state says {r.msg!r}")
    assert not bad, "\n".join(bad[:5])


@optsets
def test_python_twin_agrees(capture, optname):
    from pgoutput_codec.pgoutput import _decode_py

    bad = [r.seq for r in decoded_rows(capture, optname)
           if _decode_py.decode_message(r.data, in_stream=r.in_stream) != r.msg]
    assert not bad, f"pure-Python twin differs from the compiled decoder on rows {bad[:20]}"


def _arrow_value(name, value):
    """A message attribute as ``decode_batch`` shows it."""
    if name.endswith("_ts") and value is not None:
        return value
    if isinstance(value, tuple) and value and hasattr(value[0], "_fields"):
        return [dict(v._asdict()) for v in value]
    if isinstance(value, tuple):
        return list(value)
    return value


@optsets
def test_decode_batch_matches_decode_message(capture, optname):
    from pgoutput_codec import decode_batch

    rows = decoded_rows(capture, optname)
    arr = pa.array([r.data for r in rows], pa.binary())
    out = decode_batch(arr)
    assert len(out) == len(rows)
    recs = out.to_pylist()
    errors = [(r.seq, rec["error"]) for r, rec in zip(rows, recs, strict=True) if rec["error"] is not None]
    assert not errors, errors[:5]
    bad = []
    for r, rec in zip(rows, recs, strict=True):
        if rec["type"] != r.msg.type:
            bad.append((r.seq, "type", rec["type"], r.msg.type))
            continue
        for name in r.msg.__dataclass_fields__:
            want = getattr(r.msg, name)
            got = rec[name]
            if name.endswith("_ts") and want is not None:
                got = datetime_to_pg_timestamp(got)
            elif name in ("first_segment",):
                got = bool(got)
            if _arrow_value(name, want) != got:
                bad.append((r.seq, name, got, want))
    assert not bad, bad[:5]


@optsets
def test_a_batch_cut_inside_a_stream_block_infers_it(capture, optname):
    """A stream block can outgrow a batch or a Spark partition (its size is
    ``logical_decoding_work_mem``): a batch that starts anywhere inside one and holds no
    Stream Start/Stop must still be decoded inside (``in_stream=None``), as a batch that
    starts outside a block is decoded outside."""
    from pgoutput_codec import decode_batch
    from pgoutput_codec.pgoutput import _decode_py

    if OPTS[optname].streaming is None:
        pytest.skip(f"{optname} does not stream")
    rows = decoded_rows(capture, optname)
    cuts = 0
    for i, r in enumerate(rows):   # a cut before every row but S/E: up to 6 rows, no S/E
        if r.msg.type in "SE":
            continue
        j = i
        while j < len(rows) and rows[j].msg.type not in "SE":
            j += 1
        piece = rows[i:min(j, i + 6)]
        if not any(p.msg.type in "IUD" for p in piece):
            continue   # only Relations/Types: nothing decides, outside by default
        cuts += r.in_stream
        for impl in (decode_batch, _decode_py.decode_batch):
            got = impl(pa.array([p.data for p in piece], pa.binary())).to_pylist()
            assert [g["error"] for g in got] == [None] * len(piece), (r.seq, impl)
            assert [g["xid"] for g in got] == [p.msg.xid if p.msg.type in "RYIUDTM" else g["xid"]
                                              for p, g in zip(piece, got, strict=True)], (r.seq, impl)
    assert cuts, "the capture has no stream block with a data row to cut"


@optsets
def test_message_types_seen(capture, optname):
    opt = OPTS[optname]
    seen = set(checks.tags(decoded_rows(capture, optname)))
    missing = set(opt.expected) - seen
    unexpected = seen - set(opt.expected) - set(opt.tolerated)
    assert not missing, f"{optname} on PG{capture.major}: never saw {sorted(missing)}"
    assert not unexpected, f"{optname} on PG{capture.major}: unexpected {sorted(unexpected)}"
    allowed_by_proto = {1: "BCORYIUDTM", 2: "BCORYIUDTMSEcA", 3: "BCORYIUDTMSEcAbPKrp",
                        4: "BCORYIUDTMSEcAbPKrp"}[opt.proto]
    assert seen <= set(allowed_by_proto + opt.tolerated)


@optsets
def test_xid_and_lsn_relations(capture, optname):
    errs = checks.check_xid_lsn(decoded_rows(capture, optname), parse_lsn(capture.facts["final_lsn"]))
    assert not errs, "\n".join(errs[:10])


@optsets
def test_relations_and_types_match_catalog(capture, optname):
    errs = checks.check_relations(capture, decoded_rows(capture, optname))
    assert not errs, "\n".join(errs[:10])


@optsets
def test_all_types_values_match_server(capture, optname):
    """Text tuples == ``col::text`` byte for byte; binary tuples == the type's send function."""
    errs = checks.check_all_types(capture, decoded_rows(capture, optname), OPTS[optname].binary)
    assert not errs, "\n".join(errs[:10])


@optsets
def test_replay_equals_final_tables(capture, optname):
    if OPTS[optname].binary:
        pytest.skip("binary tuples: replay compared in text option sets; binary values checked "
                    "against send functions in test_all_types_values_match_server")
    errs = checks.check_replay_text(capture, decoded_rows(capture, optname))
    assert not errs, "\n".join(errs[:10])


# ---------------------------------------------------------------------------------------
# Scenario-specific facts
# ---------------------------------------------------------------------------------------
def _relid(cap, name):
    return next(oid for oid, rel in cap.catalog.items() if rel["name"] == name)


def _txn_of(rows, xid):
    return [r for r in rows if r.xid == xid]


@optsets
def test_scenario_facts(capture, optname):
    cap, opt = capture, OPTS[optname]
    rows = decoded_rows(cap, optname)
    msgs = [r.msg for r in rows]
    f = cap.facts

    # Type messages: the enum, its array, the domain (domain OID, base type's name)
    ys = {m.type_oid: m for m in msgs if m.type == "Y"}
    by_name = {t["name"]: oid for oid, t in cap.types.items()}
    assert {by_name["mood"], by_name["_mood"], by_name["posint"]} <= set(ys)
    assert (ys[by_name["posint"]].namespace, ys[by_name["posint"]].type_name) == ("", "int4")

    # replica identities
    upd = collections.defaultdict(list)
    for m in msgs:
        if m.type in "UD":
            upd[(m.type, m.relation_id)].append(m.old_kind)
    assert upd[("U", _relid(cap, "rid_default"))] == [None, "K"]
    assert upd[("D", _relid(cap, "rid_default"))] == ["K"]
    assert upd[("U", _relid(cap, "rid_full"))] == ["O", "O"]
    assert upd[("D", _relid(cap, "rid_full"))] == ["O"]
    assert upd[("U", _relid(cap, "rid_index"))] == [None, "K"]
    key_upd = next(m for m in msgs if m.type == "U" and m.relation_id == _relid(cap, "rid_default")
                   and m.old_kind == "K")
    assert [c.kind for c in key_upd.old_tuple] == ["b" if opt.binary else "t", "n"]  # non-key as 'n'

    # TOAST: both updates of toasty leave the external value unchanged ('u')
    toast = [m for m in msgs if m.type == "U" and m.relation_id == _relid(cap, "toasty")]
    assert [m.new_tuple[2].kind for m in toast] == ["u", "u"]

    # TRUNCATE: CASCADE pulls in the child; options 3 = CASCADE | RESTART IDENTITY
    truncs = [(m.options, set(m.relation_ids)) for m in msgs if m.type == "T"]
    assert truncs == [(3, {_relid(cap, n) for n in ("trunc_parent", "trunc_other", "trunc_child")}),
                      (0, {_relid(cap, "trunc_other")})]

    # Origin
    origins = [(r.xid, r.msg) for r in rows if r.msg.type == "O"]
    assert [(x, m.origin_name, m.origin_lsn) for x, m in origins] == [
        (f["origin_xid"], scenarios.ORIGIN_NAME, parse_lsn(scenarios.ORIGIN_LSN))]
    begin = next(r.msg for r in rows if r.msg.type == "B" and r.xid == f["origin_xid"])
    # the commit timestamp is the one given to pg_replication_origin_xact_setup
    assert begin.commit_ts == 757_382_400_000_000  # 2024-01-01 00:00:00+00

    # logical messages
    ms = {m.prefix: (r.xid, m) for r, m in zip(rows, msgs, strict=True) if m.type == "M"}
    if "M" in opt.expected:
        assert ms["pgc_tx"][1].flags == 1 and ms["pgc_tx"][1].content == b"transactional content"
        assert ms["pgc_ntx"][0] == 0 and ms["pgc_ntx"][1].flags == 0
        assert ms["pgc_ntx"][1].content == b"\x00\xff\\"
        assert ms["pgc_ntx_in_xact"][0] == f["message_xact_xid"]
        assert "pgc_ntx_rolled_back" in ms and "pgc_tx_rolled_back" not in ms
        assert ms["pgc_stream"][1].xid == (f["stream_xid"] if opt.streaming else None)
    else:
        assert not ms

    # streaming: subxact abort inside the big committed transaction; top-level abort
    aborts = [m for m in msgs if m.type == "A"]
    if opt.streaming:
        sub = [a for a in aborts if a.xid == f["stream_xid"]]
        assert len(sub) == 1 and sub[0].subxid != sub[0].xid
        top = [a for a in aborts if a.xid == f["stream_aborted_xid"]]
        if cap.major >= 18:
            # PG18 sees the transaction already aborted and never streams it
            assert top == [] and f["stream_aborted_xid"] not in {m.xid for m in msgs if m.type == "S"}
        else:
            assert len(top) == 1 and top[0].subxid == top[0].xid
        for a in aborts:
            assert (a.abort_lsn is not None) == (opt.streaming == "parallel")
            assert (a.abort_ts is not None) == (opt.streaming == "parallel")
        streamed = {m.xid for m in msgs if m.type == "c"}
        assert f["stream_xid"] in streamed
    else:
        assert not aborts

    # two-phase
    gids = collections.defaultdict(str)
    for m in msgs:
        if m.type in "bPKrp":
            gids[m.gid] += m.type
    if "b" in opt.expected:
        want = {"pgc_gid_commit": "bPK", "pgc_gid_rollback": "bPr", "pgc_gid_stream_commit": "pK",
                "pgc_gid_stream_rollback": "pr"}
        if cap.major >= 18:
            # already rolled back when decoded: PG18 sends an empty b…P instead of streaming it
            want["pgc_gid_stream_rollback"] = "bPr"
        assert dict(gids) == want
        empty = [i for i, r in enumerate(rows) if r.msg.type == "b" and rows[i + 1].msg.type == "P"]
        assert len(empty) == (1 if cap.major >= 18 else 0)
    else:
        assert not gids
        committed = {r.xid for r in rows if r.msg.type == "B"}
        assert f["xid_pgc_gid_commit"] in committed and f["xid_pgc_gid_rollback"] not in committed

    # interleaving sessions: session 2 arrives first, session 1's changes have lower LSNs
    b1 = next(i for i, r in enumerate(rows) if r.msg.type == "B" and r.xid == f["interleave_s1_xid"])
    b2 = next(i for i, r in enumerate(rows) if r.msg.type == "B" and r.xid == f["interleave_s2_xid"])
    assert b2 < b1 and rows[b1 + 1].lsn < rows[b2 + 1].lsn
    assert any(rows[i].lsn > rows[i + 1].lsn for i in range(b2, b1 + 1))

    # schema change: three Relation messages for schema_change, the last with b and varchar(20)
    sc = [m for m in msgs if m.type == "R" and m.relation_id == _relid(cap, "schema_change")]
    assert [[c.name for c in m.columns] for m in sc] == [["id", "a"], ["id", "a", "b"], ["id", "a", "b"]]
    assert [(c.type_oid, c.type_modifier) for c in sc[-1].columns][1] == (1043, 24)

    # partitions published via the root only
    part = {m.relation_id for m in msgs if m.type in "IUD" and m.relation_id in
            {_relid(cap, n) for n in ("part_root", "part_eu", "part_us")}}
    assert part == {_relid(cap, "part_root")}

    # mixed case, non-ASCII column name
    mc = next(m for m in msgs if m.type == "R" and m.relation_id == _relid(cap, "MixedCase"))
    assert (mc.namespace, mc.relation_name, [c.name for c in mc.columns]) == ("Sch", "MixedCase",
                                                                              ["Id", "Val", "ünï col"])

    # stored generated column: published on PG18 with publish_generated_columns only
    gen = next(m for m in msgs if m.type == "R" and m.relation_id == _relid(cap, "gen_cols"))
    assert ("a_doubled" in [c.name for c in gen.columns]) == (cap.major >= 18)


def test_capture_is_fast(capture):
    """Scenarios + peeks of one server (for the corpus: as measured when it was captured)."""
    assert capture.seconds < 30, f"scenarios + peeks took {capture.seconds:.1f}s"
