"""What the server's catalog says of types, as the entries of an archive's type catalog
(:mod:`.catalog`): the SQL that reads them from a live server, transitively from the
columns of tables, and one entry's canonical form."""

from __future__ import annotations

import json

from ..pgoutput.messages import parse_lsn
from .facts import ARRAY_ELEM, BY_OID

__all__ = ["KINDS", "type_entry", "CATALOG_SQL", "USER_TYPES", "seed_sql", "entry_of_row", "read_types",
           "server_position", "DIGEST_SQL", "types_digest"]

#: what a type recorded is
KINDS = ("enum", "domain", "array", "composite", "range", "multirange", "base")

_FIELDS = ("oid", "namespace", "name", "kind", "labels", "attributes", "base_oid", "base_typmod", "extension",
           "extension_version")


def type_entry(d: dict) -> dict:
    """One type's entry in its canonical form (every field, in JSON types); ValueError
    naming what is wrong."""
    if not isinstance(d, dict):
        raise ValueError(f"a type entry is an object, not {type(d).__name__}")
    unknown = set(d) - set(_FIELDS)
    if unknown:
        raise ValueError(f"type entry {d.get('oid')!r}: unknown field(s) {sorted(unknown)}")
    try:
        oid = int(d["oid"])
        kind = d["kind"]
        if kind not in KINDS:
            raise ValueError(f"type {oid}: kind {kind!r} is none of {', '.join(KINDS)}")
        base = d.get("base_oid")
        entry = {
            "oid": oid, "namespace": _text(d.get("namespace")), "name": _text(d.get("name")), "kind": kind,
            "labels": [str(x) for x in d.get("labels") or ()],
            "attributes": [[str(n), int(o), int(m)] for n, o, m in d.get("attributes") or ()],
            "base_oid": None if base is None else int(base),
            "base_typmod": -1 if d.get("base_typmod") is None else int(d["base_typmod"]),
            "extension": _text(d.get("extension")), "extension_version": _text(d.get("extension_version")),
        }
    except KeyError as e:
        raise ValueError(f"type entry {d.get('oid')!r}: no {e.args[0]!r}") from None
    except (TypeError, ValueError) as e:
        if isinstance(e, ValueError) and str(e).startswith("type "):
            raise
        raise ValueError(f"type entry {d.get('oid')!r}: {e}") from None
    if kind in ("domain", "array", "range", "multirange") and entry["base_oid"] is None:
        raise ValueError(f"type {oid} ({kind}): no base_oid")
    return entry


def _text(v):
    return None if v is None else str(v)


#: the details of every type reachable from the seed types (``{seed}``: a SELECT of
#: type OIDs), one JSON object per type; built-in types are filtered out after
CATALOG_SQL = """
WITH RECURSIVE seed(oid) AS ({seed}),
reach(oid) AS (
  SELECT oid FROM seed
  UNION
  SELECT x.oid FROM reach r JOIN pg_type t ON t.oid = r.oid,
  LATERAL (
    SELECT t.typbasetype WHERE t.typtype = 'd'
    UNION ALL SELECT t.typelem WHERE t.typelem <> 0 AND t.typcategory = 'A'
    UNION ALL SELECT t.typarray WHERE t.typarray <> 0 AND t.oid >= 16384
    UNION ALL SELECT a.atttypid FROM pg_attribute a
      WHERE t.typtype = 'c' AND a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL SELECT g.rngsubtype FROM pg_range g WHERE g.rngtypid = t.oid
    UNION ALL SELECT (to_jsonb(g) ->> 'rngmultitypid')::oid FROM pg_range g WHERE g.rngtypid = t.oid
    UNION ALL SELECT g.rngtypid FROM pg_range g WHERE (to_jsonb(g) ->> 'rngmultitypid')::oid = t.oid
  ) x(oid)
  WHERE x.oid IS NOT NULL AND x.oid <> 0
)
SELECT json_build_object(
  'oid', t.oid::int8, 'namespace', n.nspname, 'name', t.typname, 'typtype', t.typtype::text,
  'category', t.typcategory::text, 'basetype', t.typbasetype::int8, 'typmod', t.typtypmod,
  'elem', t.typelem::int8,
  'labels', (SELECT json_agg(e.enumlabel ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid),
  'attributes', (SELECT json_agg(json_build_array(a.attname, a.atttypid::int8, a.atttypmod) ORDER BY a.attnum)
                 FROM pg_attribute a WHERE t.typtype = 'c' AND a.attrelid = t.typrelid AND a.attnum > 0
                 AND NOT a.attisdropped),
  'subtype', (SELECT g.rngsubtype::int8 FROM pg_range g WHERE g.rngtypid = t.oid),
  'range', (SELECT g.rngtypid::int8 FROM pg_range g WHERE (to_jsonb(g) ->> 'rngmultitypid')::oid = t.oid),
  'extension', (SELECT json_build_array(x.extname, x.extversion) FROM pg_depend d
                JOIN pg_extension x ON x.oid = d.refobjid
                WHERE d.classid = 'pg_type'::regclass AND d.objid = t.oid
                AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' LIMIT 1)
)::text
FROM reach r JOIN pg_type t ON t.oid = r.oid JOIN pg_namespace n ON n.oid = t.typnamespace
ORDER BY t.oid
"""

#: seed: the columns of every user table
_ALL_TABLES = """SELECT a.atttypid FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%'"""
#: seed: the columns of the tables of the publications {names} (a text[] expression)
_PUBLISHED = """SELECT a.atttypid FROM pg_publication_tables p
  JOIN pg_namespace n ON n.nspname = p.schemaname
  JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
  JOIN pg_attribute a ON a.attrelid = c.oid
  WHERE p.pubname = ANY({names}) AND a.attnum > 0 AND NOT a.attisdropped"""
#: seed: every type not built in, enums and domains (what ``load_from_connection`` reads)
USER_TYPES = "SELECT t.oid FROM pg_type t WHERE t.oid >= 16384 OR t.typtype IN ('e', 'd')"

_WHERE = ("SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text,"
          " current_setting('TimeZone')")


def _text_literal(s: str) -> str:
    """A SQL text literal of ``s`` whatever it holds (as UTF-8 hex: no quoting to get wrong)."""
    return f"convert_from(decode('{s.encode().hex()}', 'hex'), 'UTF8')"


def seed_sql(publication=None, oids=()) -> str:
    """The seed of :data:`CATALOG_SQL`: the column types of the tables of ``publication``
    (comma-separated names; None: of every user table), and the type OIDs ``oids``."""
    if publication is None:
        seed = _ALL_TABLES
    else:
        names = [n.strip() for n in publication.split(",") if n.strip()]
        arr = "ARRAY[" + ", ".join(_text_literal(n) for n in names) + "]::text[]" if names else "ARRAY[]::text[]"
        seed = _PUBLISHED.format(names=arr)
    oids = sorted({int(o) for o in oids})
    if oids:
        seed += " UNION SELECT unnest(ARRAY[" + ", ".join(str(o) for o in oids) + "]::oid[])"
    return seed


def entry_of_row(d: dict) -> dict | None:
    """A type entry of one row of :data:`CATALOG_SQL` (a dict); None for a built-in type."""
    oid = int(d["oid"])
    if oid in BY_OID or oid in ARRAY_ELEM:
        return None
    typtype = d["typtype"]
    ext = d.get("extension") or (None, None)
    e = {"oid": oid, "namespace": d["namespace"], "name": d["name"], "extension": ext[0],
         "extension_version": ext[1]}
    if typtype == "e":
        e.update(kind="enum", labels=d.get("labels") or [])
    elif typtype == "d":
        e.update(kind="domain", base_oid=d["basetype"], base_typmod=d["typmod"])
    elif typtype == "c":
        e.update(kind="composite", attributes=d.get("attributes") or [])
    elif typtype == "r":
        e.update(kind="range", base_oid=d["subtype"])
    elif typtype == "m":
        e.update(kind="multirange", base_oid=d["range"])
    elif d["category"] == "A" and d["elem"]:
        e.update(kind="array", base_oid=d["elem"])
    else:                   # a base type (an extension's, typically), a pseudo-type
        e.update(kind="base")
    return type_entry(e)


def read_types(conn, seed: str) -> list:
    """The type entries of :data:`CATALOG_SQL` from seed ``seed`` over DB-API ``conn``."""
    cur = conn.cursor()
    try:
        cur.execute(CATALOG_SQL.format(seed=seed))
        rows = cur.fetchall()
    finally:
        cur.close()
    out = []
    for (raw,) in rows:
        e = entry_of_row(json.loads(raw.decode() if isinstance(raw, bytes) else raw))
        if e is not None:
            out.append(e)
    return out


def server_position(conn):
    """(the server's WAL LSN now as an int, its session ``TimeZone``) over DB-API ``conn``."""
    cur = conn.cursor()
    try:
        cur.execute(_WHERE)
        lsn, zone = cur.fetchone()
    finally:
        cur.close()
    lsn = lsn.decode() if isinstance(lsn, bytes) else lsn
    zone = zone.decode() if isinstance(zone, bytes) else zone
    return parse_lsn(lsn) if lsn is not None else 0, zone


#: one digest of what the catalog says of the types ``{oids}`` (an oid[] expression):
#: their pg_type rows, their attributes, enum labels and owning extension's version; it
#: changes when any of them does (a composite gaining an attribute sends no message)
DIGEST_SQL = """SELECT md5(coalesce(string_agg(x, ',' ORDER BY x), '')) FROM (
  SELECT concat_ws(':', 't', t.oid, t.typname, t.typnamespace, t.typtype, t.typbasetype, t.typtypmod, t.typelem,
                   t.typrelid) FROM pg_type t WHERE t.oid = ANY({oids})
  UNION ALL SELECT concat_ws(':', 'a', t.oid, a.attnum, a.attname, a.atttypid, a.atttypmod, a.attisdropped)
    FROM pg_type t JOIN pg_attribute a ON a.attrelid = t.typrelid
    WHERE t.oid = ANY({oids}) AND t.typtype = 'c' AND a.attnum > 0
  UNION ALL SELECT concat_ws(':', 'e', e.enumtypid, e.enumsortorder, e.enumlabel) FROM pg_enum e
    WHERE e.enumtypid = ANY({oids})
  UNION ALL SELECT concat_ws(':', 'x', d.objid, x.extname, x.extversion) FROM pg_depend d
    JOIN pg_extension x ON x.oid = d.refobjid
    WHERE d.classid = 'pg_type'::regclass AND d.objid = ANY({oids}) AND d.refclassid = 'pg_extension'::regclass
    AND d.deptype = 'e'
) s(x)"""


def types_digest(conn, oids) -> str:
    """:data:`DIGEST_SQL` of type OIDs ``oids`` over DB-API ``conn``."""
    arr = "ARRAY[" + ", ".join(str(int(o)) for o in sorted(oids)) + "]::oid[]"
    cur = conn.cursor()
    try:
        cur.execute(DIGEST_SQL.format(oids=arr))
        (digest,) = cur.fetchone()
    finally:
        cur.close()
    return digest.decode() if isinstance(digest, bytes) else digest
