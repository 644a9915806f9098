"""Shared record samples and Hypothesis strategies for the openGauss tests."""

from __future__ import annotations

import itertools

from hypothesis import strategies as st

from pgoutput_codec.opengauss import Column, Record

TS = "2024-02-05 14:46:35.203057+08"


def sample_records():
    return [
        Record("B", 0x0CFE64D0, csn=2359, first_lsn=0x0CFE64D0, xid=78109, commit_time=TS, options="XT"),
        Record("I", 0x0CFE6500, schema="public", table="t1",
               new_tuple=(Column("a", 23, b"1"), Column('"Mixed"', 25, None), Column("c", 25, b""))),
        Record("U", 0x0CFE6600, schema="public", table="t1",
               new_tuple=(Column("a", 23, b"4"), Column("b", 25, "y\u00e9".encode())),
               old_tuple=(Column("a", 23, b"3"),)),
        Record("U", 0x0CFE6680, schema="s", table="t", new_tuple=(Column("a", 23, b"5"),)),
        Record("U", 0x0CFE6690, schema="s", table="t", old_tuple=(Column("a", 23, b"5"),)),
        Record("U", 0x0CFE66A0, schema="s", table="t"),
        Record("I", 0x0CFE66B0, schema="s", table="t"),
        Record("I", 0x0CFE66C0, schema="s", table="t", new_tuple=()),
        Record("D", 0x0CFE6700, schema="public", table="t1", old_tuple=(Column("a", 23, b"4"),)),
        Record("D", 0x0CFE6800, schema="public", table="t1"),
        Record("C", 0x0CFE6900, xid=78109, commit_time=TS, options="XT"),
    ]


def begin_variants():
    """Every subset, in every order, of B's optional fields."""
    vals = {"X": ("xid", 2**64 - 1), "T": ("commit_time", TS), "O": ("origin_id", 2**32 - 1),
            "N": ("user_name", "omm\u00e9")}
    for k in range(5):
        for perm in itertools.permutations("XTON", k):
            kw = dict(vals[t] for t in perm)
            yield Record("B", 10, csn=7, first_lsn=10, options="".join(perm), **kw)


def commit_variants():
    vals = {"X": ("xid", 5), "T": ("commit_time", TS)}
    for k in range(3):
        for perm in itertools.permutations("XT", k):
            yield Record("C", 20, options="".join(perm), **dict(vals[t] for t in perm))


_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_u64 = st.integers(0, 2**64 - 1)
_u32 = st.integers(0, 2**32 - 1)
_col = st.tuples(_names, _u32, st.one_of(st.none(), st.binary(max_size=12))).map(lambda t: Column(*t))
_tuple = st.lists(_col, max_size=4).map(tuple)


@st.composite
def records(draw):
    t = draw(st.sampled_from("BCIUD"))
    lsn = draw(_u64)
    if t in "BC":
        allowed = "XTON" if t == "B" else "XT"
        order = "".join(draw(st.permutations(allowed))[:draw(st.integers(0, len(allowed)))])
        kw = {}
        for o in order:
            if o == "X":
                kw["xid"] = draw(_u64)
            elif o == "T":
                kw["commit_time"] = draw(_names)
            elif o == "O":
                kw["origin_id"] = draw(_u32)
            else:
                kw["user_name"] = draw(_names)
        if t == "B":
            kw.update(csn=draw(_u64), first_lsn=draw(_u64))
        return Record(t, lsn, options=order, **kw)
    new = draw(st.one_of(st.none(), _tuple)) if t in "IU" else None
    old = draw(st.one_of(st.none(), _tuple)) if t in "UD" else None
    return Record(t, lsn, schema=draw(_names), table=draw(_names), new_tuple=new, old_tuple=old)


def expected_rows(frames_records):
    """Rows decode_batch should give for [(row, [Record, ...]), ...]."""
    out = []
    for row, recs in frames_records:
        for r in recs:
            d = {f: None for f in ("lsn", "type", "csn", "first_lsn", "xid", "commit_time", "origin_id",
                                   "user_name", "schema", "table", "new_tuple", "old_tuple", "error")}
            d.update(r.to_row())
            for k in ("new_tuple", "old_tuple"):
                if d[k] is not None:
                    d[k] = [{**c, "type_name": None, "unchanged_toast": False} for c in d[k]]
            out.append({"row": row, **d})
    return out
