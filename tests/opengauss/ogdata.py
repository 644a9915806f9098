"""Shared record samples and Hypothesis strategies for the openGauss tests."""

from __future__ import annotations

import itertools

from hypothesis import strategies as st

from pgoutput_codec.opengauss import Column, Record
from pgoutput_codec.opengauss.encode import encode_frame

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


def altered_table_frames():
    """Frames of tables whose columns change (``public.t``: v1 → v2 → v3 → v1 → v2 and
    a REPLICA IDENTITY FULL Delete naming a column, ``x``, added later), holding a record
    for each rule of ``record_columns``: a Delete of ``public.u`` before any new tuple of
    it takes the first one, although a second list follows in the same frame; new tuples
    in an excluded user's transaction and in one never committed still set the columns
    in force, for a Delete in a later frame and in the same one; a key-only Delete takes
    the columns set frames before, or earlier in its own frame, not those set later in
    it. Returns (frames, the column names of each change row given with
    ``exclude_users="etl"``, in order)."""
    v1 = [("id", 23), ("a", 25), ("b", 25)]
    v2 = [("id", 23), ("b", 25), ("c", 25)]          # a dropped, c added
    v3 = [("id", 23), ("b", 1700), ("c", 25)]        # b's type changed
    full = v3 + [("x", 25)]                          # x added, no new tuple sent since

    def tup(cols, i):
        return tuple(Column(n, o, f"{i}{n}".encode() if n != "id" else str(i).encode()) for n, o in cols)

    def key(i):
        return (Column("id", 23, str(i).encode()),)

    def dml(op, lsn, cols=None, i=0, old=None, table="t"):
        return Record(op, lsn, schema="public", table=table, new_tuple=None if cols is None else tup(cols, i),
                      old_tuple=old)

    def of(cols):
        return [c for c, _ in cols]

    u1, u2 = [("k", 25), ("w", 25)], [("k", 25), ("w", 25), ("z", 25)]
    frames = [
        [Record("B", 100, csn=1, first_lsn=100, xid=1), dml("D", 101, old=(Column("k", 25, b"9"),), table="u"),
         dml("I", 102, v1, 1), dml("I", 103, v1, 2), dml("I", 104, u1, 3, table="u"),
         dml("I", 105, u2, 4, table="u"), Record("C", 110, xid=1)],
        [Record("B", 120, csn=2, first_lsn=120, xid=2, user_name="etl"), dml("I", 121, v2, 5),
         Record("C", 130, xid=2)],
        [Record("B", 140, csn=3, first_lsn=140, xid=3), dml("D", 141, old=key(1))],
        [dml("D", 142, old=key(2)), dml("I", 143, v3, 6), dml("I", 144, v3, 8), dml("D", 145, old=key(8)),
         Record("C", 150, xid=3), Record("B", 160, csn=4, first_lsn=160, xid=4), dml("I", 161, v1, 7)],
        [Record("B", 170, csn=5, first_lsn=170, xid=5), dml("D", 171, old=key(6)), Record("C", 175, xid=5),
         Record("B", 180, csn=6, first_lsn=180, xid=6, user_name="etl"), dml("I", 181, v2, 9),
         Record("C", 185, xid=6), Record("B", 190, csn=7, first_lsn=190, xid=7), dml("D", 191, old=tup(full, 5)),
         Record("C", 195, xid=7)],
    ]
    names = [of(u1), of(v1), of(v1), of(u1), of(u2),      # the Delete of u: u's first list
             of(v2),                                      # the excluded user's v2, a frame before
             of(v2), of(v3), of(v3), of(v3),              # v2 still, then the frame's own v3
             of(v1),                                      # the never committed v1, a frame before
             of(v2) + ["x"]]                              # an excluded v2 in its frame; x added
    return [encode_frame(f) for f in frames], names
