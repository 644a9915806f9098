"""Tables of every type of docs/types.md's user-defined and extension rows on a real server,
captured with the project's own ``capture`` in text and binary mode, and the server's own
output of every value, taken before the server stops.

:func:`capture_typed` runs the scenario on one server:

1. the types and tables of :data:`GROUPS`: ``structs`` (every server), ``extensions``
   (Debian's contrib and PostGIS: PostgreSQL 15) and ``vectors`` (pgvector: the wheel's 16 and 18),
   two slots (text, binary) on one publication, their rows;
2. the ``evolving`` table in three steps, each captured before the next: an enum and a
   composite as first defined; the composite gains an attribute (``ALTER TYPE … ADD
   ATTRIBUTE``); the enum's column dropped, the enum dropped and created again with other
   labels, the column added again;
3. the server's output of every value through psycopg's own loaders of the server's text
   (composites as dicts, ranges and multiranges, hstore as dicts, arrays nested as sent),
   and SQL where no loader says it all (``ST_AsBinary``/``ST_SRID``, ``vector::real[]``,
   ``sparsevec::text``, ``enum_range``). A bound or attribute the Arrow type cannot hold
   (an ``infinity`` date) is a :class:`Special`.

The result (:class:`Typed`) pickles, so that a copy of it beside copies of the archives can
serve as a fixture with no server.
"""

from __future__ import annotations

import dataclasses
import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List

SLOTS = {"text": "typed_text", "binary": "typed_binary"}
PUBLICATION = "typed_pub"


@dataclasses.dataclass(frozen=True)
class Special:
    """A value the server printed that its Arrow type cannot hold (``infinity``)."""

    text: str


@dataclasses.dataclass(frozen=True)
class Geometry:
    """The server's ``ST_AsBinary`` (ISO WKB) and ``ST_SRID`` of a geometry or geography."""

    wkb: bytes
    srid: int


# ------------------------------------------------------------------------------ the scenario
STRUCTS_DDL = [
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
    # a label added BEFORE another: sort order differs from creation (OID) order
    "ALTER TYPE mood ADD VALUE 'so so' BEFORE 'ok'",
    "CREATE TYPE pair AS (a int4, b text)",
    "CREATE TYPE nested AS (p pair, m mood, d date, n numeric(10,2), tags text[], f float8)",
    "CREATE DOMAIN pair_d AS pair",
    "CREATE TYPE floatrange AS RANGE (subtype = float8)",
    "CREATE TABLE structs (id int PRIMARY KEY,"
    " e mood, ea mood[], ea2 mood[][],"
    " c pair, ca pair[], ca2 pair[][], o nested, oa nested[], d pair_d, da pair_d[],"
    " r4 int4range, r8 int8range, rn numrange, rd daterange, rts tsrange, rtz tstzrange, rf floatrange,"
    " r4a int4range[], r4a2 int4range[][], rfa floatrange[],"
    " m4 int4multirange, md datemultirange, mf floatmultirange, m4a int4multirange[], mda2 datemultirange[][])",
]
STRUCTS_ROWS = [
    "INSERT INTO structs VALUES (1,"
    " 'happy', '{sad,\"so so\",happy}', '{{sad,ok},{happy,NULL}}',"
    " '(1,one)', '{\"(1,a)\",\"(2,b)\"}', '{{\"(1,x)\",\"(2,y)\"},{\"(3,)\",NULL}}',"
    " ROW(ROW(7, 'seven')::pair, 'ok', '2024-02-29', 12.5, '{a,b}', 1.5)::nested,"
    " ARRAY[ROW(ROW(1, 'x')::pair, 'sad', '2000-01-01', -0.01, '{}', -2.25)::nested, NULL],"
    " '(5,five)', '{\"(6,six)\"}',"
    " '[1,5)', '[-9223372036854775807,9223372036854775806)', '[1.5,2.25]', '[2020-01-01,2020-12-31)',"
    " '[\"2020-01-01 00:00:00.5\",\"2020-01-02 12:00:00\")', '[\"2020-01-01 00:00+00\",\"2020-06-01 12:30+02\")',"
    " '[1.5,2.5)',"
    " '{\"[1,2)\",empty,\"(,3)\"}', '{{\"[1,2)\",empty},{\"(,5)\",\"[7,)\"}}', '{\"[0.5,1]\",NULL}',"
    " '{[1,3),[5,7)}', '{[2020-01-01,2020-02-01),[2021-01-01,2021-01-05)}', '{[1,2],(3,4)}',"
    " '{\"{[1,2)}\",\"{}\"}', '{{\"{[2020-01-01,2020-01-03)}\"},{\"{}\"}}')",
    # quoting, nulls inside values, empties, unbounded and infinite bounds
    "INSERT INTO structs VALUES (2,"
    " 'so so', '{}', '{{ok}}',"
    " ROW(NULL, 'he said \"hi\", \\ (back) ,'), '{NULL,\"(,)\"}', '{{\"(1,)\"}}',"
    " ROW(ROW(NULL, NULL)::pair, NULL, 'infinity', NULL, '{NULL,\"\"}', 'NaN')::nested,"
    " '{}', ROW(NULL, '')::pair_d, '{}',"
    " 'empty', '(,)', '(,Infinity]', '[-infinity,2024-01-01)', '[2020-01-01 00:00:00,infinity)',"
    " '(,\"2020-01-01 00:00+05:45\"]', '[-Infinity,Infinity]',"
    " '{}', '{{empty}}', '{}',"
    " '{}', '{(,2020-01-01),[2021-01-01,infinity)}', '{(,0),[10,)}', '{}', '{}')",
    "INSERT INTO structs VALUES (3, 'sad', '{NULL}', NULL, ROW(NULL, NULL), NULL, NULL,"
    " NULL, NULL, NULL, NULL, '[3,)', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL)",
    "INSERT INTO structs (id) VALUES (4)",
]
STRUCTS_LATER = [
    "UPDATE structs SET e = 'ok', c = '(2,two)', r4 = '[10,20)', m4 = '{[0,1)}' WHERE id = 1",
    "DELETE FROM structs WHERE id = 4",
]

EXTENSIONS_DDL = [
    "CREATE EXTENSION hstore",
    "CREATE EXTENSION citext",
    "CREATE EXTENSION ltree",
    "CREATE EXTENSION isn",
    "CREATE EXTENSION postgis",
    "CREATE TABLE extensions (id int PRIMARY KEY, h hstore, ha hstore[], ci citext, cia citext[],"
    " lt ltree, lq lquery, isbn isbn, isbn13 isbn13, ean ean13, issn issn, ismn ismn, upc upc,"
    " gp geometry(Point,4326), gm geometry, gz geometry(PointZ), gg geography)",
]
EXTENSIONS_ROWS = [
    "INSERT INTO extensions VALUES (1, 'a=>1, b=>NULL', ARRAY['x=>y'::hstore, NULL, ''::hstore],"
    " 'MiXeD Case', '{One,TWO}', 'Top.Science.Astronomy', '*.Science|Sci*.*{1,2}',"
    " '978-0-393-04002-9', '978-0-393-04002-9', '0036000291452', '1436-4522', 'M-706700-00-7',"
    " '036000291452',"
    " 'SRID=4326;POINT(30.5 -1.25)', 'SRID=3857;POINT(1 2)', 'POINT Z (1 2 3)',"
    " 'SRID=4326;POINT(-71.06 42.36)')",
    "INSERT INTO extensions VALUES (2, '\"quo\\\"te\"=>\"back\\\\slash\", \"ключ\"=>\"значение\","
    " \"\"=>\"\", \"comma, =>\"=>\" spaced \"', '{}', 'ünïcödé', '{}', '', 'foo|bar.baz',"
    " NULL, NULL, NULL, NULL, NULL, NULL,"
    " 'SRID=4326;POINT EMPTY', 'POINT M (1 2 4)', 'POINT Z (-1.5 0 1e10)',"
    " 'SRID=4326;LINESTRING(0 0, 10 10)')",
    "INSERT INTO extensions VALUES (3, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, 'POINT ZM (1 2 3 4)', NULL, 'SRID=4326;POLYGON((0 0, 1 0, 1 1, 0 0))')",
    "INSERT INTO extensions (id, gm) VALUES (4, 'SRID=4326;GEOMETRYCOLLECTION(POINT(1 2), LINESTRING(0 0, 1 1))')",
    "INSERT INTO extensions (id, gm) VALUES (5, 'CURVEPOLYGON(CIRCULARSTRING(0 0, 4 0, 4 4, 0 4, 0 0))')",
    "INSERT INTO extensions (id, gm) VALUES (6, 'SRID=2056;COMPOUNDCURVE(CIRCULARSTRING(0 0, 1 1, 1 0), (1 0, 0 1))')",
    "INSERT INTO extensions (id, gm) VALUES (7, 'MULTIPOLYGON EMPTY')",
    "INSERT INTO extensions (id, gm) VALUES (8, 'SRID=4326;MULTISURFACE(CURVEPOLYGON(CIRCULARSTRING(0 0, 4 0, 4 4, 0 4,"
    " 0 0)), ((10 10, 14 12, 11 10, 10 10)))')",
    "INSERT INTO extensions (id, gm) VALUES (9, 'TRIANGLE((0 0, 0 9, 9 0, 0 0))')",
]
EXTENSIONS_LATER = [
    "UPDATE extensions SET h = h || 'c=>3'::hstore, ci = 'changed', gp = 'SRID=4326;POINT(0 0)' WHERE id = 1",
]

VECTORS_DDL = [
    "CREATE EXTENSION vector",
    "CREATE TABLE vectors (id int PRIMARY KEY, v vector(3), hv halfvec(3), sv sparsevec(5), va vector[])",
]
VECTORS_ROWS = [
    "INSERT INTO vectors VALUES (1, '[1.5,-2.25,3e38]', '[0.5,-2,65504]', '{1:1.5,3:-2}/5', ARRAY['[1,2]'::vector])",
    "INSERT INTO vectors VALUES (2, '[0,1e-38,-0.125]', '[0.25,-0.000061035156,1024]', '{}/5', '{}')",
    "INSERT INTO vectors VALUES (3, NULL, NULL, '{5:0.5}/5', NULL)",
]
VECTORS_LATER = ["UPDATE vectors SET v = '[1,2,3]', sv = '{2:7}/5' WHERE id = 3"]

#: the evolving table, step by step (each step captured before the next): (SQL, ids it changes)
EVOLVING_STEPS = [
    [("CREATE TYPE evo_mood AS ENUM ('low', 'high')", ()),
     ("CREATE TYPE evo_pair AS (a int4, b text)", ()),
     ("CREATE TABLE evolving (id int PRIMARY KEY, e evo_mood, c evo_pair, ca evo_pair[])", ()),
     ("INSERT INTO evolving VALUES (1, 'low', '(1,one)', '{\"(1,x)\"}'), (2, 'high', '(2,two)', NULL)", (1, 2))],
    [("ALTER TYPE evo_pair ADD ATTRIBUTE z date", ()),
     ("INSERT INTO evolving VALUES (3, 'high', '(3,three,2024-01-31)', '{\"(3,y,infinity)\",\"(4,,)\"}')", (3,)),
     ("UPDATE evolving SET e = 'low' WHERE id = 2", (2,))],
    [("ALTER TABLE evolving DROP COLUMN e", ()),
     ("DROP TYPE evo_mood", ()),
     ("CREATE TYPE evo_mood AS ENUM ('red', 'green', 'blue')", ()),
     ("ALTER TYPE evo_mood ADD VALUE 'amber' BEFORE 'green'", ()),
     ("ALTER TABLE evolving ADD COLUMN e evo_mood", ()),
     ("INSERT INTO evolving VALUES (4, '(4,four,2024-02-01)', NULL, 'amber'), (5, NULL, '{}', 'blue')", (4, 5)),
     ("UPDATE evolving SET e = 'red' WHERE id = 1", (1,))],
]

#: (table, its DDL, rows, later changes, the extensions it needs)
GROUPS = [
    ("structs", STRUCTS_DDL, STRUCTS_ROWS, STRUCTS_LATER, ()),
    ("extensions", EXTENSIONS_DDL, EXTENSIONS_ROWS, EXTENSIONS_LATER,
     ("hstore", "citext", "ltree", "isn", "postgis")),
    ("vectors", VECTORS_DDL, VECTORS_ROWS, VECTORS_LATER, ("vector",)),
]

#: columns whose expected value is SQL of the server (the rest: psycopg's loaders)
GEOMETRY_COLUMNS = {"extensions": ("gp", "gm", "gz", "gg")}
VECTOR_COLUMNS = {"vectors": ("v", "hv")}
SPARSE_COLUMNS = {"vectors": ("sv",)}
#: columns of arrays psycopg has no loader of: the server casts them to one it has
CAST_COLUMNS = {"structs": {"ea": "ea::text[]", "ea2": "ea2::text[]", "da": "da::pair[]"},
                "extensions": {"cia": "cia::text[]"}}
#: enum columns -> their type (for enum_range)
ENUM_COLUMNS = {"structs": {"e": "mood", "ea": "mood", "ea2": "mood"}}


@dataclasses.dataclass
class Typed:
    """One server's capture: archives and the server's output, before it stopped."""

    major: int
    version: str
    #: mode ("text", "binary") -> archive directory written by ``capture``
    archives: Dict[str, str]
    #: table -> {id: {column: value}} after every change (what a snapshot must give)
    final: Dict[str, Dict[int, dict]]
    #: the evolving table after each change, in commit order: (op, id, {column: value})
    evolving: List[tuple]
    #: (table, column) -> the enum's labels in sort order (``enum_range``)
    enum_labels: Dict[tuple, List[str]]
    #: the evolving table's enum labels at each step (its OID changes at the last)
    evolving_labels: List[List[str]]
    #: extension -> version, of the extensions the server has
    extensions: Dict[str, str]
    #: table -> its column names in order
    columns: Dict[str, List[str]]

    @property
    def tables(self) -> List[str]:
        return list(self.final)


# ------------------------------------------------------------------------------ the server's output
def _special_loaders(conn):
    """date/timestamp(tz) loaders that give an ``infinity`` as a :class:`Special` (psycopg's
    own refuse it: no Python date holds it)."""
    from psycopg.types import datetime as pdt

    def special(base):
        class Loader(base):
            def load(self, data):
                b = bytes(data)
                if b in (b"infinity", b"-infinity"):
                    return Special(b.decode())
                return super().load(data)
        return Loader

    for name, base in (("date", pdt.DateLoader), ("timestamp", pdt.TimestampLoader),
                       ("timestamptz", pdt.TimestamptzLoader)):
        conn.adapters.register_loader(name, special(base))


def _register(conn, extensions):
    """psycopg loaders of the scenario's types on ``conn`` (composites as dicts)."""
    from psycopg.types.composite import CompositeInfo, register_composite
    from psycopg.types.multirange import MultirangeInfo, register_multirange
    from psycopg.types.range import RangeInfo, register_range

    _special_loaders(conn)
    for name in ("pair", "nested", "evo_pair"):
        info = CompositeInfo.fetch(conn, name)
        if info is None:
            continue
        names = list(info.field_names)
        register_composite(info, conn, factory=lambda *args, _n=names: dict(zip(_n, args, strict=True)))
    info = RangeInfo.fetch(conn, "floatrange")
    if info is not None:
        register_range(info, conn)
        register_multirange(MultirangeInfo.fetch(conn, "floatmultirange"), conn)
    if "hstore" in extensions:
        from psycopg.types.hstore import register_hstore
        from psycopg.types import TypeInfo
        register_hstore(TypeInfo.fetch(conn, "hstore"), conn)


def _plain(value):
    """psycopg's value in the shape of Arrow's Python value (Range -> struct dict,
    Multirange -> list, nested)."""
    from psycopg.types.multirange import Multirange
    from psycopg.types.range import Range

    if isinstance(value, Range):
        return {"lower": _plain(value.lower), "upper": _plain(value.upper), "lower_inc": value.lower_inc,
                "upper_inc": value.upper_inc, "empty": value.isempty}
    if isinstance(value, (list, Multirange)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


_SPARSE = re.compile(r"\{(.*)\}/(\d+)\Z")


def sparse_of(text: str) -> dict:
    """pgvector's text of a sparsevec (``{1:1.5,3:-2}/5``, 1-based) as dim, 0-based
    indices and values."""
    m = _SPARSE.match(text)
    pairs = [p.split(":") for p in m[1].split(",")] if m[1] else []
    return {"dim": int(m[2]), "indices": [int(i) - 1 for i, _ in pairs], "values": [float(v) for _, v in pairs]}


def server_rows(conn, table: str) -> Dict[int, dict]:
    """The server's ``table`` as {id: {column: value}} (psycopg loaders registered)."""
    cur = conn.execute(f"SELECT * FROM {table} ORDER BY id")
    names = [d.name for d in cur.description]
    rows = {r[0]: {n: _plain(v) for n, v in zip(names, r, strict=True)} for r in cur.fetchall()}
    for col, sql in CAST_COLUMNS.get(table, {}).items():
        for rid, value in conn.execute(f"SELECT id, {sql} FROM {table}"):
            rows[rid][col] = _plain(value)
    for col in GEOMETRY_COLUMNS.get(table, ()):
        for rid, wkb, srid in conn.execute(f"SELECT id, ST_AsBinary({col}), ST_SRID({col}) FROM {table}"):
            rows[rid][col] = None if wkb is None else Geometry(bytes(wkb), srid)
    for col in VECTOR_COLUMNS.get(table, ()):
        for rid, vals in conn.execute(f"SELECT id, {col}::real[] FROM {table}"):
            rows[rid][col] = vals
    for col in SPARSE_COLUMNS.get(table, ()):
        for rid, text in conn.execute(f"SELECT id, {col}::text FROM {table}"):
            rows[rid][col] = None if text is None else sparse_of(text)
    if table == "vectors":   # vector[]: each vector's floats
        for rid, vals in conn.execute("SELECT id, ARRAY(SELECT x::real[]::text FROM unnest(va) x) FROM vectors "
                                      "WHERE va IS NOT NULL"):
            rows[rid]["va"] = [[float(f) for f in v.strip("{}").split(",")] for v in vals]
    return rows


def _labels(conn, typname: str) -> List[str]:
    return conn.execute(f"SELECT enum_range(NULL::{typname})::text[]").fetchone()[0]


# ------------------------------------------------------------------------------ capture
def _dsn(srv) -> str:
    return " ".join(f"{k}={v}" for k, v in srv.conninfo().items())


def _capture(srv, out_root):
    """One capture run of each slot into its archive."""
    from pgoutput_codec.cli.capture import capture

    def one(mode):      # (the slots' runs are independent: side by side, as two jobs would run)
        return capture(_dsn(srv), SLOTS[mode], PUBLICATION, os.path.join(out_root, mode), binary=mode == "binary",
                       poll_interval=0.02, stop_after=1, log=lambda msg: None)

    with ThreadPoolExecutor(len(SLOTS)) as pool:
        list(pool.map(one, SLOTS))


def available_extensions(conn) -> set:
    return {r[0] for r in conn.execute("SELECT name FROM pg_available_extensions")}


def capture_typed(srv, out_root: str) -> Typed:
    """Run the scenario on ``srv`` and capture it under ``out_root`` (``text/``, ``binary/``)."""
    with srv.connect() as conn:
        x = conn.execute
        have = available_extensions(conn)
        groups = [g for g in GROUPS if set(g[4]) <= have]
        for _, ddl, _, _, _ in groups:
            for sql in ddl:
                x(sql)
        for sql, _ in EVOLVING_STEPS[0][:3]:
            x(sql)
        tables = [g[0] for g in groups] + ["evolving"]
        x(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE {', '.join(tables)}")
        for slot in SLOTS.values():
            x("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        extensions = dict(x("SELECT extname, extversion FROM pg_extension WHERE extname <> 'plpgsql'").fetchall())
        for _, _, rows, later, _ in groups:
            for sql in rows + later:
                x(sql)

        evolving, evolving_labels = [], []

        def evolve(step):
            for sql, ids in step:
                x(sql)
                if ids:
                    with srv.connect() as c:    # loaders of the types as they are now
                        _register(c, extensions)
                        now = server_rows(c, "evolving")
                    evolving.extend((sql.split()[0], i, now[i]) for i in ids)
            evolving_labels.append(_labels(conn, "evo_mood"))

        evolve(EVOLVING_STEPS[0][3:])
        with srv.connect() as c:
            _register(c, extensions)
            final = {t: server_rows(c, t) for t in tables if t != "evolving"}
            enum_labels = {(t, col): _labels(c, typ) for t, cols in ENUM_COLUMNS.items() for col, typ in cols.items()}
            columns = {t: [d.name for d in c.execute(f"SELECT * FROM {t} LIMIT 0").description] for t in tables}
        _capture(srv, out_root)
        for step in EVOLVING_STEPS[1:]:
            evolve(step)
            _capture(srv, out_root)
        with srv.connect() as c:
            _register(c, extensions)
            final["evolving"] = server_rows(c, "evolving")
            columns["evolving"] = [d.name for d in c.execute("SELECT * FROM evolving LIMIT 0").description]
        for slot in SLOTS.values():
            x("SELECT pg_drop_replication_slot(%s)", (slot,))
        x(f"DROP PUBLICATION {PUBLICATION}")
    return Typed(srv.major, srv.version, {m: os.path.join(out_root, m) for m in SLOTS}, final, evolving,
                 enum_labels, evolving_labels, extensions, columns)
