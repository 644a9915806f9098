"""What the tests of enums, composites and ranges share: the server's text and send forms
of SQL expressions, and a registry of a database's user types read from its catalog (the
facts decoding needs of each: labels, attributes, subtypes)."""

from __future__ import annotations

import pyarrow as pa

from arrow_values import plain
from pgoutput_codec import typecatalog as tc
from pgoutput_codec.typecatalog import convert_column


def forms(conn, exprs):
    """[(type_oid, typmod, text bytes, send bytes)] of each SQL expression."""
    cur = conn.cursor()
    q = "SELECT " + ", ".join(exprs)
    cur.execute(q, binary=False)
    rt = cur.pgresult
    text = [(rt.ftype(i), rt.fmod(i), rt.get_value(0, i)) for i in range(rt.nfields)]
    cur.execute(q, binary=True)
    rb = cur.pgresult
    return [(oid, mod, t, rb.get_value(0, i)) for i, (oid, mod, t) in enumerate(text)]


def registry_of(conn, reg=None):
    """The enums, composites, ranges (with their multiranges), domains and arrays of the
    database's user types."""
    reg = reg or tc.TypeRegistry()
    cur = conn.cursor()
    rows = cur.execute(
        "SELECT t.oid::int8, t.typname, t.typtype::text, t.typarray::int8, t.typbasetype::int8, t.typtypmod,"
        " r.rngsubtype::int8, r.rngmultitypid::int8, (SELECT typarray FROM pg_type m WHERE m.oid = r.rngmultitypid)::int8"
        " FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace LEFT JOIN pg_range r ON r.rngtypid = t.oid"
        " WHERE n.nspname = 'public' AND t.typtype IN ('e', 'c', 'r', 'd')"
        " AND (t.typtype <> 'c' OR (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c')").fetchall()
    for oid, name, tt, arr, base, typmod, sub, mr, mra in rows:
        if tt == "e":
            labels = [x for (x,) in cur.execute("SELECT enumlabel FROM pg_enum WHERE enumtypid = %s"
                                                 " ORDER BY enumsortorder", (oid,)).fetchall()]
            reg.register_enum(oid, labels, name=name, array_oid=arr)
        elif tt == "c":
            attrs = cur.execute("SELECT attname, atttypid::int8, atttypmod FROM pg_attribute a JOIN pg_type t"
                                " ON t.typrelid = a.attrelid WHERE t.oid = %s AND attnum > 0 AND NOT attisdropped"
                                " ORDER BY attnum", (oid,)).fetchall()
            reg.register_composite(oid, attrs, name=name, array_oid=arr)
        elif tt == "r":
            reg.register_range(oid, sub, name=name, array_oid=arr, multirange_oid=mr, multirange_array_oid=mra)
        else:
            reg.register_domain(oid, base, typmod, name=name, array_oid=arr)
    return reg


def outcome(kinds, data, oid, reg, fast, mod=-1):
    """What converting gives, comparable: ('ok', type, values, notes) or ('error', index)."""
    try:
        col = convert_column(kinds, data, oid, mod, reg, fast=fast)
    except tc.ConversionError as e:
        return ("error", e.index)
    col.values.validate(full=True)
    return ("ok", str(col.values.type), plain(col.values),
            col.special.to_pylist() if col.special is not None else None)


def both_forms(conn, exprs, reg):
    """Each expression's value converted from its text form and from its send form, fast
    and plain Python (all four must agree): [(type, value, note)]."""
    out = []
    for oid, mod, text, send in forms(conn, exprs):
        got = []
        for kind, raw in (("t", text), ("b", send)):
            for fast in (True, False):
                col = convert_column([kind, "n"], [raw, None], oid, mod, reg, fast=fast)
                col.values.validate(full=True)
                got.append((col.values.type, col.values.to_pylist()[0],
                            col.special.to_pylist()[0] if col.special is not None else None))
        assert all(g == got[0] for g in got), (text, got)
        out.append(got[0])
    return out


def enum_type():
    return pa.dictionary(pa.int32(), pa.string())
