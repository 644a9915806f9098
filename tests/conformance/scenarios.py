"""Scenario catalog: make a real server emit every pgoutput message its versions can send.

``run_all(server)`` builds the schema, creates the publication and two slots (a plain
one, and a two-phase one for protocol 3/4), runs the workload, then peeks both slots with
``pg_logical_slot_peek_binary_changes`` once per option set the server accepts. Peeking
does not consume, so every option set decodes the very same WAL.

What each scenario is for (docs/protocol.md):
- ``all_types``: every builtin type of §3 (NULLs, arrays 1-D/2-D/bounds with awkward
  elements, numeric with and without typmod, NaN/±Infinity, ±infinity dates and
  timestamps, timestamptz under a non-UTC TimeZone, …), an enum and a domain (→ 'Y');
- ``rid_*``: REPLICA IDENTITY DEFAULT/FULL/USING INDEX/NOTHING, key-changing updates;
- ``toasty``: an UPDATE leaving an out-of-line TOASTed value unchanged (kind 'u');
- ``trunc_*``: TRUNCATE of several tables, CASCADE + RESTART IDENTITY;
- logical messages (transactional, non-transactional, one inside a rolled-back xact);
- a replication origin ('O');
- ``stream_big``: a streamed transaction > logical_decoding_work_mem with a rolled-back
  savepoint ('A' of a subtransaction), a streamed top-level abort;
- two-phase: PREPARE + COMMIT PREPARED, PREPARE + ROLLBACK PREPARED, both also streamed;
- two sessions interleaving (change LSNs go backwards in arrival order);
- ``schema_change`` (ADD COLUMN, ALTER TYPE → new Relation), ``part_root`` published via
  its root, ``"Sch"."MixedCase"``, ``gen_cols`` (stored generated column; PG18 publishes
  it with ``publish_generated_columns``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

PUBLICATION = "pgc_pub"
SLOT_PLAIN = "pgc_plain"
SLOT_TWOPHASE = "pgc_2pc"
ORIGIN_NAME = "pgc_origin"
ORIGIN_LSN = "0/12345678"
ORIGIN_TS = "2024-01-01 00:00:00+00"
TIMEZONE = "Asia/Kathmandu"


@dataclass(frozen=True)
class OptionSet:
    name: str
    slot: str
    min_major: int
    options: Tuple[Tuple[str, str], ...]
    #: message tags this option set must produce on every server that accepts it
    expected: str
    #: tags that may appear but need not (documented server quirks)
    tolerated: str = ""

    @property
    def proto(self) -> int:
        return int(dict(self.options)["proto_version"])

    @property
    def binary(self) -> bool:
        return dict(self.options).get("binary") == "true"

    @property
    def streaming(self) -> Optional[str]:
        return dict(self.options).get("streaming")


_PUB = ("publication_names", PUBLICATION)
OPTION_SETS: Tuple[OptionSet, ...] = (
    OptionSet("v1_text", SLOT_PLAIN, 15, (("proto_version", "1"), _PUB),
              expected="BCORYIUDT", tolerated="A"),
    OptionSet("v1_binary_messages", SLOT_PLAIN, 15,
              (("proto_version", "1"), _PUB, ("binary", "true"), ("messages", "true")),
              expected="BCORYIUDTM", tolerated="A"),
    OptionSet("v2_streaming", SLOT_PLAIN, 15,
              (("proto_version", "2"), _PUB, ("streaming", "true"), ("messages", "true")),
              expected="BCORYIUDTMSEcA"),
    OptionSet("v3_2pc_binary_streaming", SLOT_TWOPHASE, 15,
              (("proto_version", "3"), _PUB, ("binary", "true"), ("streaming", "true"),
               ("messages", "true"), ("two_phase", "true")),
              expected="BCORYIUDTMSEcAbPKrp"),
    OptionSet("v4_2pc_parallel_origin", SLOT_TWOPHASE, 16,
              (("proto_version", "4"), _PUB, ("streaming", "parallel"), ("origin", "any"),
               ("messages", "true"), ("two_phase", "true")),
              expected="BCORYIUDTMSEcAbPKrp"),
)

# ----------------------------------------------------------------------------------------
# all_types: (column, SQL type, values for rows 1..5 as SQL literals; None = NULL).
# Row 3 is all NULL. A literal is used as  <literal>::<type>.
# ----------------------------------------------------------------------------------------
_TEXT_ARR = ("ARRAY['a,b', 'q\"uote', E'back\\\\slash', NULL, 'NULL', '', ' sp ', '{br}', 'ünï']")
TYPE_COLUMNS: List[Tuple[str, str, List[Optional[str]]]] = [
    ("c_bool", "bool", ["true", "false", None, "true", "false"]),
    ("c_bytea", "bytea", [r"'\x00ff5c27'", "''", None, r"'\x'", r"'\xdeadbeef'"]),
    ("c_char", '"char"', ["'a'", "'Z'", None, "'\\'", "'\"'"]),
    ("c_name", "name", ["'some_name'", "'Ünïcode name'", None, "''", "'x'"]),
    ("c_int8", "int8", ["9223372036854775807", "-9223372036854775808", None, "0", "-1"]),
    ("c_int2", "int2", ["32767", "-32768", None, "0", "-1"]),
    ("c_int4", "int4", ["2147483647", "-2147483648", None, "0", "-1"]),
    ("c_text", "text", ["'hello, world'", "E'tab\\there\\nnewline \"q\" \\\\ back'", None,
                        "'ünïcødé ☃'", "''"]),
    ("c_oid", "oid", ["4294967295", "0", None, "1", "16384"]),
    ("c_json", "json", ["'{\"a\": [1, 2.50, \"x\"],  \"b\": null}'", "'[]'", None, "'\"s\"'", "'1e3'"]),
    ("c_xml", "xml", ["'<a b=\"1\">t&amp;</a>'", "'text only'", None, "'<x/>'", "''"]),
    ("c_point", "point", ["'(1.5,-2)'", "'(0,0)'", None, "'(1e+300,-1e-300)'", "'(NaN,Infinity)'"]),
    ("c_cidr", "cidr", ["'10.1.0.0/16'", "'2001:db8::/32'", None, "'0.0.0.0/0'", "'192.168.1.1/32'"]),
    ("c_float4", "float4", ["3.14159", "'NaN'", None, "'Infinity'", "'-Infinity'"]),
    ("c_float8", "float8", ["2.718281828459045", "'-Infinity'", None, "'-0'", "1e-308"]),
    ("c_macaddr8", "macaddr8", ["'08:00:2b:01:02:03:04:05'", "'00:00:00:00:00:00:00:00'", None,
                                "'ff:ff:ff:ff:ff:ff:ff:ff'", "'08002b0102030405'"]),
    ("c_money", "money", ["'12.34'", "'-92233720368547758.08'", None, "'0'", "'92233720368547758.07'"]),
    ("c_macaddr", "macaddr", ["'08:00:2b:01:02:03'", "'00:00:00:00:00:00'", None, "'ff-ff-ff-ff-ff-ff'",
                              "'08002b010203'"]),
    ("c_inet", "inet", ["'192.168.1.5/24'", "'::1'", None, "'10.0.0.1'", "'2001:db8::1/64'"]),
    ("c_bpchar", "char(5)", ["'ab'", "'abcde'", None, "''", "'ü'"]),
    ("c_varchar", "varchar(10)", ["'hi'", "''", None, "'ten chars!'", "'ünï'"]),
    ("c_date", "date", ["'2024-02-29'", "'infinity'", None, "'-infinity'", "'0044-03-15 BC'"]),
    ("c_time", "time", ["'13:45:59.123456'", "'24:00:00'", None, "'00:00:00'", "'23:59:59.999999'"]),
    ("c_timestamp", "timestamp", ["'2024-02-05 14:46:35.203057'", "'infinity'", None, "'-infinity'",
                                  "'1999-12-31 23:59:59.999999'"]),
    ("c_timestamptz", "timestamptz", ["'2024-02-05 14:46:35.203057+08'", "'infinity'", None,
                                      "'-infinity'", "'1900-01-01 00:00:00+00'"]),
    ("c_interval", "interval", ["'1 year 2 mons 3 days 04:05:06.789'", "'-1 days +02:00'", None, "'0'",
                                "'-178000000 years'"]),
    ("c_timetz", "timetz", ["'13:45:59.123+05:30'", "'00:00:00-12'", None, "'24:00:00+14:59'",
                            "'01:02:03.000004+00'"]),
    ("c_bit", "bit(5)", ["B'10101'", "B'00000'", None, "B'11111'", "B'10000'"]),
    ("c_varbit", "varbit", ["B'1'", "B''", None, "B'1010101010101'", "B'0'"]),
    ("c_numeric", "numeric", ["12345.678", "'NaN'", None, "'Infinity'", "'-Infinity'"]),
    ("c_numeric_tm", "numeric(12,3)", ["-12345.678", "'NaN'", None, "0", "999999999.999"]),
    ("c_numeric_big", "numeric", ["0.000000000000000000001", "-1e100", None, "100000000", "-0.0"]),
    ("c_uuid", "uuid", ["'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'00000000-0000-0000-0000-000000000000'",
                        None, "'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF'", "'{a0eebc999c0b4ef8bb6d6bb9bd380a12}'"]),
    ("c_pg_lsn", "pg_lsn", ["'16/B374D848'", "'0/0'", None, "'FFFFFFFF/FFFFFFFF'", "'1/0'"]),
    ("c_jsonb", "jsonb", ["'{\"b\": 1, \"a\": [true, null, 1.50]}'", "'\"str\"'", None, "'{}'",
                          "'{\"k\": \"\\\\u00e9 \\\\\\\\ \\\\\\\"\"}'"]),
    ("c_int4range", "int4range", ["'[1,10)'", "'empty'", None, "'(,5]'", "'[-2147483648,0)'"]),
    ("c_numrange", "numrange", ["'(1.5,2.5]'", "'(,)'", None, "'[NaN,NaN]'", "'[0,1e10)'"]),
    ("c_tsrange", "tsrange", ["'[2024-01-01,infinity)'", "'empty'", None, "'(,2024-01-01 10:00]'",
                              "'[2000-01-01,2000-01-02)'"]),
    ("c_tstzrange", "tstzrange", ["'[2024-01-01 00:00+00,2024-01-02 00:00+00)'", "'empty'", None,
                                  "'[-infinity,infinity]'", "'(,)'"]),
    ("c_daterange", "daterange", ["'[2024-01-01,2024-02-01)'", "'empty'", None, "'[2024-01-01,2024-01-01]'",
                                  "'(,infinity)'"]),
    ("c_int8range", "int8range", ["'(,5]'", "'empty'", None, "'[1,2)'", "'[0,9223372036854775807)'"]),
    # arrays
    ("c_bool_arr", "bool[]", ["'{t,f,NULL}'", "'{}'", None, "'{{t},{f}}'", "'{NULL}'"]),
    ("c_bytea_arr", "bytea[]", [r"ARRAY['\x00'::bytea, '\x5c22'::bytea]", "'{}'", None, "'{NULL,\"\\\\x\"}'",
                                r"ARRAY['\x2c7b7d'::bytea]"]),
    ("c_int8_arr", "int8[]", ["'{1,-2,9223372036854775807}'", "'{}'", None, "'[0:1]={1,2}'", "'{NULL,NULL}'"]),
    ("c_int2_arr", "int2[]", ["'{{1,2},{3,4}}'", "'{}'", None, "'{-32768}'", "'[1:1][3:4]={{7,8}}'"]),
    ("c_int4_arr", "int4[]", ["'[2:3]={5,6}'", "'{{1,NULL},{3,4}}'", None, "'{}'", "'{0}'"]),
    ("c_text_arr", "text[]", [_TEXT_ARR, "ARRAY[['a','b'],['c,','d\"']]", None, "'{}'",
                              "ARRAY['NULL', 'null', 'NuLL', NULL]"]),
    ("c_json_arr", "json[]", ["ARRAY['{\"a\":1}'::json, '[1, \"x,y\"]'::json]", "'{}'", None, "'{NULL}'",
                              "ARRAY['\"s\"'::json]"]),
    ("c_float4_arr", "float4[]", ["'{1.5,NaN,Infinity}'", "'{-Infinity}'", None, "'{}'", "'{-0,1e-38}'"]),
    ("c_float8_arr", "float8[]", ["'{-Infinity,0.1}'", "'{NaN}'", None, "'{}'", "'{{1,2},{3,4}}'"]),
    ("c_inet_arr", "inet[]", ["'{10.0.0.1,::1/128}'", "'{}'", None, "'{NULL}'", "'{192.168.0.0/16}'"]),
    ("c_bpchar_arr", "char(3)[]", ["'{a,bc}'", "'{\"a b\",\"\"}'", None, "'{}'", "'{NULL,\"x,\"}'"]),
    ("c_varchar_arr", "varchar[]", ["'{\"x y\",z}'", "'{\"\"}'", None, "'{}'", "'{\"\\\\\\\\\"}'"]),
    ("c_date_arr", "date[]", ["'{2024-01-01,infinity}'", "'{-infinity}'", None, "'{}'", "'{NULL}'"]),
    ("c_timestamp_arr", "timestamp[]", ["'{\"2024-01-01 00:00:00\",-infinity}'", "'{infinity}'", None,
                                        "'{}'", "'{\"2000-01-01 00:00:00.000001\"}'"]),
    ("c_timestamptz_arr", "timestamptz[]", ["'{\"2024-01-01 00:00:00+00\",infinity}'", "'{-infinity}'",
                                            None, "'{}'", "'{\"1900-06-01 12:00:00+00\"}'"]),
    ("c_numeric_arr", "numeric[]", ["'{1.5,NaN,-0.001}'", "'{Infinity,-Infinity}'", None, "'{}'",
                                    "'{{1,2},{3,NULL}}'"]),
    ("c_uuid_arr", "uuid[]", ["'{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'", "'{}'", None, "'{NULL}'",
                              "'{00000000-0000-0000-0000-000000000000,a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'"]),
    ("c_jsonb_arr", "jsonb[]", ["ARRAY['{\"k\": \"v\"}'::jsonb, '[1, 2]'::jsonb]", "'{}'", None, "'{NULL}'",
                                "ARRAY['null'::jsonb]"]),
    # user types: enum, enum array, domain (→ Type 'Y' messages); aclitem has no send function
    ("c_mood", "mood", ["'happy'", "'Très \"bien\"'", None, "'sad'", "'ok'"]),
    ("c_mood_arr", "mood[]", ["'{sad,ok}'", "'{}'", None, "ARRAY['Très \"bien\"'::mood]", "'{NULL}'"]),
    ("c_posint", "posint", ["42", "2147483647", None, "1", "7"]),
    ("c_aclitem", "aclitem", ["'postgres=r/postgres'", "'=rw/postgres'", None, "'postgres=arw/postgres'",
                              "'postgres=r*/postgres'"]),
]
N_TYPE_ROWS = 5

BIG_PAD = "repeat(md5(g::text), 30)"  # 960 bytes, unique per row, compresses well in parquet
TOAST_VALUE = "(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 300) i)"  # 9600 bytes


@dataclass
class Capture:
    """Everything one server produced: captured rows per option set plus ground truth."""

    major: int
    version: str
    #: option set name -> list of (lsn text, xid int, data bytes) in arrival order
    rows: Dict[str, List[Tuple[str, int, bytes]]] = field(default_factory=dict)
    #: option set name -> error text for option sets the server refused
    refused: Dict[str, str] = field(default_factory=dict)
    #: relid -> dict(namespace, name, replident, relkind, columns=[(name, typoid, typmod, generated)],
    #:               key=[column names])
    catalog: Dict[int, dict] = field(default_factory=dict)
    #: all_types: id -> {column: text or None}
    types_text: Dict[int, Dict[str, Optional[str]]] = field(default_factory=dict)
    #: all_types: id -> {column: typsend bytes or None (NULL), or the str 'text' (no send fn)}
    types_send: Dict[int, Dict[str, object]] = field(default_factory=dict)
    #: user types of the workload: oid -> dict(namespace, name, typtype, wire_namespace, wire_name)
    #: (wire_* = what a Type message must carry: a domain's base type, "" for pg_catalog)
    types: Dict[int, dict] = field(default_factory=dict)
    #: tables: list of dict(schema, table, relid, relkind, columns=[...], rows=[[text|None]])
    tables: List[dict] = field(default_factory=list)
    #: facts the workload recorded (xids of interesting transactions, origin, gids, ...)
    facts: Dict[str, object] = field(default_factory=dict)
    #: type columns left out (e.g. xml on a server built without libxml)
    skipped_columns: Dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    #: "live" (captured in this run) or "corpus" (rebuilt from tests/data)
    source: str = "live"

    @property
    def label(self) -> str:
        return f"pg{self.major}" + ("" if self.source == "live" else f"-{self.source}")

    def option_sets(self):
        return [o for o in OPTION_SETS if o.name in self.rows]

    # ---- (de)serialization for the committed corpus (tools/capture_corpus.py) ----------
    def to_json(self) -> dict:
        """Everything but ``rows`` and ``tables`` (those go to parquet), JSON-safe."""
        return dict(
            major=self.major, version=self.version, refused=self.refused, seconds=round(self.seconds, 3),
            skipped_columns=self.skipped_columns, facts=self.facts,
            catalog={str(k): v for k, v in self.catalog.items()},
            types={str(k): v for k, v in self.types.items()},
            types_text={str(k): v for k, v in self.types_text.items()},
            types_send={str(k): {c: (v.hex() if isinstance(v, bytes) else v) for c, v in d.items()}
                        for k, d in self.types_send.items()},
        )

    @classmethod
    def from_corpus(cls, truth: dict, corpus_rows: list, tables: list) -> "Capture":
        """Rebuild from ground_truth.json's entry, corpus.parquet rows and tables.parquet rows
        (both as lists of dicts of one server)."""
        cap = cls(major=truth["major"], version=truth["version"], refused=truth["refused"],
                  skipped_columns=truth["skipped_columns"], facts=truth["facts"], seconds=truth["seconds"],
                  source="corpus")
        cap.catalog = {int(k): dict(v, columns=[tuple(c) for c in v["columns"]])
                       for k, v in truth["catalog"].items()}
        cap.types = {int(k): v for k, v in truth["types"].items()}
        cap.types_text = {int(k): v for k, v in truth["types_text"].items()}
        cap.types_send = {int(k): {c: (bytes.fromhex(v) if v not in (None, "text") else v) for c, v in d.items()}
                          for k, d in truth["types_send"].items()}
        for row in sorted(corpus_rows, key=lambda r: (r["option_set"], r["seq"])):
            cap.rows.setdefault(row["option_set"], []).append((row["lsn"], row["xid"], row["data"]))
        for t in tables:
            cap.tables.append(dict(
                schema=t["schema"], table=t["table"], relid=t["relid"], relkind=t["relkind"],
                replident=t["replica_identity"], ispartition=t["is_partition"], rows=t["rows"],
                columns=[dict(name=n, type_oid=o, type_modifier=m, generated=g) for n, o, m, g in zip(
                    t["column_names"], t["column_type_oids"], t["column_type_modifiers"], t["column_generated"], strict=True)]))
        return cap


def _xid(conn) -> int:
    return int(conn.execute("SELECT txid_current() % 4294967296").fetchone()[0])


def _setup(conn, cap: Capture) -> List[Tuple[str, str, List[Optional[str]]]]:
    cols = []
    for name, typ, vals in TYPE_COLUMNS:
        if typ == "xml":
            try:
                conn.execute("SELECT '<a/>'::xml")
            except Exception as exc:  # server built without libxml
                cap.skipped_columns[name] = str(exc).splitlines()[0]
                continue
        cols.append((name, typ, vals))
    ddl = [
        "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'Très \"bien\"')",
        "CREATE DOMAIN posint AS int4 CHECK (VALUE > 0)",
        "CREATE TABLE all_types (id int PRIMARY KEY, "
        + ", ".join(f"{n} {t}" for n, t, _ in cols) + ")",
        "CREATE TABLE rid_default (id int PRIMARY KEY, v text)",
        "CREATE TABLE rid_full (id int, v text, n numeric)",
        "ALTER TABLE rid_full REPLICA IDENTITY FULL",
        "CREATE TABLE rid_index (a int NOT NULL, b text NOT NULL, v text)",
        "CREATE UNIQUE INDEX rid_index_ab ON rid_index (b, a)",
        "ALTER TABLE rid_index REPLICA IDENTITY USING INDEX rid_index_ab",
        "CREATE TABLE rid_nothing (id int, v text)",
        "ALTER TABLE rid_nothing REPLICA IDENTITY NOTHING",
        "CREATE TABLE toasty (id int PRIMARY KEY, note text, big text)",
        "ALTER TABLE toasty ALTER COLUMN big SET STORAGE EXTERNAL",
        "CREATE TABLE trunc_parent (id serial PRIMARY KEY, v text)",
        "CREATE TABLE trunc_child (id serial PRIMARY KEY, parent_id int REFERENCES trunc_parent)",
        "CREATE TABLE trunc_other (id serial PRIMARY KEY, v text)",
        "CREATE TABLE stream_big (id int PRIMARY KEY, pad text)",
        "CREATE TABLE schema_change (id int PRIMARY KEY, a text)",
        "CREATE TABLE part_root (id int, region text, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region)",
        "CREATE TABLE part_eu PARTITION OF part_root FOR VALUES IN ('eu')",
        "CREATE TABLE part_us PARTITION OF part_root FOR VALUES IN ('us')",
        'CREATE SCHEMA "Sch"',
        'CREATE TABLE "Sch"."MixedCase" ("Id" int PRIMARY KEY, "Val" text, "ünï col" int)',
        "CREATE TABLE gen_cols (id int PRIMARY KEY, a int, a_doubled int GENERATED ALWAYS AS (a * 2) STORED)",
    ]
    for sql in ddl:
        conn.execute(sql)
    pub_opts = "publish_via_partition_root = true"
    if cap.major >= 18:
        pub_opts += ", publish_generated_columns = stored"
    conn.execute(f"CREATE PUBLICATION {PUBLICATION} FOR ALL TABLES WITH ({pub_opts})")
    conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput', false, false)", (SLOT_PLAIN,))
    conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput', false, true)", (SLOT_TWOPHASE,))
    conn.execute("SELECT pg_replication_origin_create(%s)", (ORIGIN_NAME,))
    return cols


def _workload(server, conn, cols, cap: Capture) -> None:
    f = cap.facts
    x = conn.execute

    # all_types: one transaction, 5 rows
    with conn.transaction():
        for r in range(N_TYPE_ROWS):
            names = ["id"] + [n for n, _, _ in cols]
            vals = [str(r + 1)] + [f"({'NULL' if v[r] is None else v[r]})::{t}" for _, t, v in cols]
            x(f"INSERT INTO all_types ({', '.join(names)}) VALUES ({', '.join(vals)})")
        f["all_types_xid"] = _xid(conn)

    # replica identities
    with conn.transaction():
        x("INSERT INTO rid_default SELECT g, 'v' || g FROM generate_series(1, 3) g")
        x("INSERT INTO rid_full SELECT g, 'v' || g, g / 3.0 FROM generate_series(1, 3) g")
        x("INSERT INTO rid_index SELECT g, 'k' || g, 'v' || g FROM generate_series(1, 3) g")
        x("INSERT INTO rid_nothing SELECT g, 'v' || g FROM generate_series(1, 3) g")
    x("UPDATE rid_default SET v = 'changed' WHERE id = 1")        # no old tuple
    x("UPDATE rid_default SET id = 10 WHERE id = 2")              # key change → 'K'
    x("DELETE FROM rid_default WHERE id = 3")                     # 'K'
    x("UPDATE rid_full SET v = NULL WHERE id = 1")                # 'O'
    x("UPDATE rid_full SET id = 20 WHERE id = 2")                 # 'O'
    x("DELETE FROM rid_full WHERE id = 3")                        # 'O'
    x("UPDATE rid_index SET v = 'changed' WHERE a = 1")           # no old tuple
    x("UPDATE rid_index SET b = 'k20' WHERE a = 2")               # 'K' (b, a)
    x("DELETE FROM rid_index WHERE a = 3")                        # 'K'

    # TOAST: update leaving the external value unchanged → 'u'
    x(f"INSERT INTO toasty VALUES (1, 'first', {TOAST_VALUE}), (2, 'second', 'small')")
    x("UPDATE toasty SET note = 'changed' WHERE id = 1")
    x("UPDATE toasty SET id = 3 WHERE id = 1")                    # key change, big still 'u'
    x("DELETE FROM toasty WHERE id = 2")

    # TRUNCATE several tables, CASCADE + RESTART IDENTITY
    with conn.transaction():
        x("INSERT INTO trunc_parent (v) VALUES ('p1'), ('p2')")
        x("INSERT INTO trunc_child (parent_id) VALUES (1), (2)")
        x("INSERT INTO trunc_other (v) VALUES ('o1')")
    x("TRUNCATE trunc_parent, trunc_other RESTART IDENTITY CASCADE")
    x("TRUNCATE trunc_other")                                     # options 0
    x("INSERT INTO trunc_parent (v) VALUES ('after')")

    # logical messages
    with conn.transaction():
        x("INSERT INTO rid_default VALUES (4, 'with message')")
        x("SELECT pg_logical_emit_message(true, 'pgc_tx', 'transactional content')")
        x("SELECT pg_logical_emit_message(false, 'pgc_ntx_in_xact', 'non-transactional in xact')")
        f["message_xact_xid"] = _xid(conn)
    x(r"SELECT pg_logical_emit_message(false, 'pgc_ntx', '\x00ff5c'::bytea)")
    with conn.transaction(force_rollback=True):
        x("SELECT pg_logical_emit_message(false, 'pgc_ntx_rolled_back', 'survives rollback')")
        x("SELECT pg_logical_emit_message(true, 'pgc_tx_rolled_back', 'never decoded')")

    # replication origin
    with server.connect() as oc:
        oc.execute("SELECT pg_replication_origin_session_setup(%s)", (ORIGIN_NAME,))
        with oc.transaction():
            oc.execute("SELECT pg_replication_origin_xact_setup(%s, %s)", (ORIGIN_LSN, ORIGIN_TS))
            oc.execute("INSERT INTO rid_default VALUES (5, 'from origin')")
            f["origin_xid"] = _xid(oc)
        oc.execute("SELECT pg_replication_origin_session_reset()")

    # streamed transaction with a rolled-back savepoint (Stream Abort of a subxact)
    with conn.transaction():
        x(f"INSERT INTO stream_big SELECT g, {BIG_PAD} FROM generate_series(1, 40) g")
        x("SELECT pg_logical_emit_message(true, 'pgc_stream', 'in a streamed xact')")
        f["stream_xid"] = _xid(conn)
        x("SAVEPOINT sp1")
        x(f"INSERT INTO stream_big SELECT g, {BIG_PAD} FROM generate_series(1001, 1100) g")
        x("ROLLBACK TO SAVEPOINT sp1")
        x(f"INSERT INTO stream_big SELECT g, {BIG_PAD} FROM generate_series(41, 120) g")
        x("UPDATE stream_big SET pad = 'short' WHERE id <= 3")
    # a streamed top-level abort
    with conn.transaction(force_rollback=True):
        x(f"INSERT INTO stream_big SELECT g, {BIG_PAD} FROM generate_series(2001, 2100) g")
        f["stream_aborted_xid"] = _xid(conn)

    # two-phase commit (also streamed)
    with server.connect() as ac:
        for gid, big, finish, base in (("pgc_gid_commit", False, "COMMIT", 100),
                                       ("pgc_gid_rollback", False, "ROLLBACK", 200),
                                       ("pgc_gid_stream_commit", True, "COMMIT", 3000),
                                       ("pgc_gid_stream_rollback", True, "ROLLBACK", 4000)):
            ac.execute("BEGIN")
            if big:
                ac.execute(f"INSERT INTO stream_big SELECT g, {BIG_PAD} FROM generate_series({base}, {base + 99}) g")
            else:
                ac.execute(f"INSERT INTO rid_default VALUES ({base}, %s)", (gid,))
            f[f"xid_{gid}"] = _xid(ac)
            ac.execute(f"PREPARE TRANSACTION '{gid}'")
            ac.execute(f"{finish} PREPARED '{gid}'")

    # interleaving sessions: session 1 begins first, session 2 commits first
    s1 = server.connect(autocommit=False)
    try:
        s1.execute("INSERT INTO rid_default VALUES (300, 'session 1 first change')")
        f["interleave_s1_xid"] = _xid(s1)
        with server.connect() as s2:
            with s2.transaction():
                s2.execute("INSERT INTO rid_default VALUES (400, 'session 2')")
                f["interleave_s2_xid"] = _xid(s2)
        s1.execute("INSERT INTO rid_default VALUES (301, 'session 1 second change')")
        s1.commit()
    finally:
        s1.close()

    # schema change mid-stream: ADD COLUMN and a typmod change → new Relation messages
    x("INSERT INTO schema_change VALUES (1, 'before')")
    x("ALTER TABLE schema_change ADD COLUMN b int")
    x("INSERT INTO schema_change VALUES (2, 'after add', 7)")
    x("UPDATE schema_change SET b = 1 WHERE id = 1")
    x("ALTER TABLE schema_change ALTER COLUMN a TYPE varchar(20)")
    x("INSERT INTO schema_change VALUES (3, 'after alter', 8)")

    # partitioned table published via its root; a cross-partition update
    x("INSERT INTO part_root VALUES (1, 'eu', 'a'), (2, 'us', 'b'), (3, 'eu', 'c')")
    x("UPDATE part_root SET v = 'a2' WHERE id = 1")
    x("UPDATE part_root SET region = 'us' WHERE id = 3")
    x("DELETE FROM part_root WHERE id = 2")

    # mixed-case names, generated column
    x('INSERT INTO "Sch"."MixedCase" VALUES (1, \'One\', 1), (2, \'Two\', 2)')
    x('UPDATE "Sch"."MixedCase" SET "Id" = 3 WHERE "Id" = 2')
    x("INSERT INTO gen_cols (id, a) VALUES (1, 10), (2, 20)")
    x("UPDATE gen_cols SET a = 11 WHERE id = 1")


def _out(col: str) -> str:
    """SQL for a column's text as its type's *output function* writes it (what pgoutput
    sends in 't' columns). Not ``col::text``: that cast differs for bool ('true' vs 't'),
    bpchar (strips the padding) and inet (adds /32 or /128); concat() calls the output
    function."""
    return f"CASE WHEN {col} IS NULL THEN NULL ELSE concat({col}) END"


def _snapshot_catalog(conn, cap: Capture) -> None:
    rels = conn.execute(
        "SELECT c.oid::int8, n.nspname, c.relname, c.relreplident, c.relkind, c.relispartition "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname IN ('public', 'Sch') AND c.relkind IN ('r', 'p') ORDER BY 1").fetchall()
    for oid, nsp, name, replident, relkind, ispartition in rels:
        cols = conn.execute(
            "SELECT attname, atttypid::int8, atttypmod, attgenerated::text FROM pg_attribute "
            "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (oid,)).fetchall()
        key = [r[0] for r in conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY (i.indkey) WHERE i.indrelid = %s AND "
            "CASE %s WHEN 'd' THEN i.indisprimary WHEN 'i' THEN i.indisreplident ELSE false END "
            "ORDER BY a.attnum", (oid, replident)).fetchall()]
        if replident == "f":
            key = [c[0] for c in cols]
        cap.catalog[oid] = dict(namespace=nsp, name=name, replident=replident, relkind=relkind,
                                ispartition=ispartition, columns=[tuple(c) for c in cols], key=key)
        ident = f'"{nsp}"."{name}"'
        colnames = [c[0] for c in cols]
        select = ", ".join(_out(f'"{c}"') for c in colnames)
        rows = conn.execute(f"SELECT {select} FROM {ident} ORDER BY 1").fetchall()
        cap.tables.append(dict(schema=nsp, table=name, relid=oid, relkind=relkind, replident=replident,
                               ispartition=ispartition,
                               columns=[dict(name=c[0], type_oid=c[1], type_modifier=c[2],
                                             generated=c[3]) for c in cols],
                               rows=[list(r) for r in rows]))


def _snapshot_types(conn, cols, cap: Capture) -> None:
    for oid, nsp, name, typtype, wnsp, wname in conn.execute(
            "SELECT t.oid::int8, n.nspname, t.typname, t.typtype::text, bn.nspname, b.typname "
            "FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
            "JOIN pg_type b ON b.oid = CASE t.typtype WHEN 'd' THEN t.typbasetype ELSE t.oid END "
            "JOIN pg_namespace bn ON bn.oid = b.typnamespace WHERE t.oid >= 16384").fetchall():
        cap.types[oid] = dict(namespace=nsp, name=name, typtype=typtype,
                              wire_namespace="" if wnsp == "pg_catalog" else wnsp, wire_name=wname)
    names = [n for n, _, _ in cols]
    rows = conn.execute(f"SELECT id, {', '.join(_out(n) for n in names)} FROM all_types ORDER BY id").fetchall()
    for row in rows:
        cap.types_text[row[0]] = dict(zip(names, row[1:], strict=True))
    sends = []
    for n in names:
        typsend = conn.execute(
            "SELECT t.typsend::oid::int8, t.typsend::regproc::text FROM pg_attribute a JOIN pg_type t "
            "ON t.oid = a.atttypid WHERE a.attrelid = 'all_types'::regclass AND a.attname = %s",
            (n,)).fetchone()
        sends.append(None if typsend[0] == 0 else typsend[1])
    exprs = [f"{s}({n})" if s else "NULL::bytea" for n, s in zip(names, sends, strict=True)]
    rows = conn.execute(f"SELECT id, {', '.join(exprs)} FROM all_types ORDER BY id").fetchall()
    for row in rows:
        d = {}
        for n, s, v in zip(names, sends, row[1:], strict=True):
            d[n] = "text" if s is None else (None if v is None else bytes(v))
        cap.types_send[row[0]] = d


def _peek(conn, cap: Capture) -> None:
    for opt in OPTION_SETS:
        flat = [v for kv in opt.options for v in kv]
        try:
            with conn.transaction():
                rows = conn.execute(
                    "SELECT lsn::text, xid::text::int8, data FROM "
                    "pg_logical_slot_peek_binary_changes(%s, NULL, NULL, VARIADIC %s::text[])",
                    (opt.slot, flat)).fetchall()
        except Exception as exc:
            if cap.major < opt.min_major:
                cap.refused[opt.name] = str(exc).splitlines()[0]
                continue
            raise
        if cap.major < opt.min_major:
            raise AssertionError(f"PG{cap.major} accepted {opt.name}, expected a refusal")
        cap.rows[opt.name] = [(lsn, xid, bytes(data)) for lsn, xid, data in rows]


def run_all(server) -> Capture:
    t0 = time.monotonic()
    cap = Capture(major=server.major, version=server.version)
    with server.connect() as conn:
        cols = _setup(conn, cap)
        _workload(server, conn, cols, cap)
        cap.facts["final_lsn"] = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
        _snapshot_catalog(conn, cap)
        _snapshot_types(conn, cols, cap)
        _peek(conn, cap)
    cap.seconds = time.monotonic() - t0
    return cap
