"""Every user-defined and extension type decodes offline: captured from a real server
(PostgreSQL 15 with Debian's contrib and PostGIS, 16 and 18 with pgvector) in text and
binary mode with the project's own ``capture``, the server then **stopped**, and the
archive decoded with no connection and no ``registry=`` (the archive carries its catalog)
gives every value equal to the server's own output, taken before it stopped
(``offline_types``: psycopg's loaders of the server's text, ``ST_AsBinary``/``ST_SRID``,
``vector::real[]``, ``enum_range``).

The paths of one process: the archive's files fed to a ``ChangeDecoder``, then
``snapshot``, ``net_changes`` and ``table_changes``; and the CLI's ``decode --changes``, whose change rows ``snapshot``
types. The ``evolving`` table holds a composite that gains an attribute and an enum dropped
and created again with other labels, each change read with the definition in force at it
(through the CLI, whose output carries every file's catalog versions).

Each server here is this module's own, not the session's shared one: it is stopped before
anything is decoded.
"""

from __future__ import annotations

import decimal
import json
import math

import numpy as np
import offline_types as ot
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import servers

from pgoutput_codec import ChangeDecoder, net_changes, snapshot, table_changes
from pgoutput_codec.archive import iter_archive, read_archive_parts

MODES = ("text", "binary")
SPECS = {spec.major: spec for spec in servers.server_specs()}
#: (server, table) where the server's installation ships the table's extensions
TABLES = [(major, name) for major, spec in sorted(SPECS.items()) for name, *_, needs in ot.GROUPS
          if spec.bindir is None or set(needs) <= spec.extensions()]


def pytest_generate_tests(metafunc):
    if "table" in metafunc.fixturenames:
        metafunc.parametrize(("major", "table"), TABLES, ids=[f"pg{m}-{t}" for m, t in TABLES])
    elif "major" in metafunc.fixturenames:
        metafunc.parametrize("major", sorted(SPECS), ids=[f"pg{m}" for m in sorted(SPECS)])


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """``captured(major)``: the scenario captured on a server of its own, the first time
    asked, the server then stopped (its directory removed) before anything is decoded."""
    done = {}

    def get(major):
        if major not in done:
            spec = SPECS[major]
            if spec.bindir is None:
                pytest.skip(f"PostgreSQL {spec.major}: {spec.missing_reason}")
            srv = servers.PgServer(spec)
            try:
                srv.start()
                done[major] = ot.capture_typed(srv, str(tmp_path_factory.mktemp(f"typed{major}")))
            finally:
                srv.stop()
            assert srv.proc is None and srv.tmpdir is None     # no server left to ask
        return done[major]

    return get


# ------------------------------------------------------------------------------ the paths
def archive_changes(path) -> pa.Table:
    """An archive's change rows as one process decodes them (docs/limits.md): a
    ``ChangeDecoder`` fed each captured file's rows (resumed rows dropped), the pieces
    put together."""
    with ChangeDecoder() as dec:
        pieces = [dec.feed(t) for _, t in iter_archive(read_archive_parts(path))]
    return pa.concat_tables(pieces)


_DECODED = {}


def changes_of(typed, mode) -> pa.Table:
    key = (typed.major, mode)
    if key not in _DECODED:
        _DECODED[key] = archive_changes(typed.archives[mode])
    return _DECODED[key]


def cli_changes(typed, mode, tmp_path) -> pa.Table:
    from pgoutput_codec.cli.main import main

    out = tmp_path / f"changes-{mode}.parquet"
    assert main(["decode", typed.archives[mode], str(out), "--changes"]) == 0
    return pq.read_table(out)


# ------------------------------------------------------------------------------ comparing
def _float_eq(got, want, arrow_type) -> bool:
    if got is None or want is None:
        return got is None and want is None
    if pa.types.is_float32(arrow_type):
        got, want = np.float32(got), np.float32(want)
    elif pa.types.is_float16(arrow_type):
        got, want = np.float16(got), np.float16(want)
    return (math.isnan(got) and math.isnan(want)) or got == want


def mismatches(got, want, arrow_type, path="") -> list:
    """Where the decoded value ``got`` (Arrow's Python value of ``arrow_type``) differs
    from the server's ``want``: a list of (path, got, want)."""
    if isinstance(want, ot.Special):
        return [] if got is None else [(path, got, want)]
    if want is None or got is None:
        return [] if want is None and got is None else [(path, got, want)]
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if isinstance(want, ot.Geometry):
        return [] if got == want.wkb else [(path, got, want.wkb)]
    if pa.types.is_struct(arrow_type):
        if not isinstance(got, dict) or not set(want) <= set(got):
            return [(path, got, want)]
        out = []
        for f in arrow_type:    # an attribute the value's definition lacks reads as null
            out += mismatches(got[f.name], want.get(f.name), f.type, f"{path}.{f.name}")
        return out
    if pa.types.is_map(arrow_type):
        if len(got) != len(want) or dict(got) != want:
            return [(path, got, want)]
        return []
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        if not isinstance(want, list) or len(got) != len(want):
            return [(path, got, want)]
        out = []
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            out += mismatches(g, w, arrow_type.value_type, f"{path}[{i}]")
        return out
    if pa.types.is_floating(arrow_type):
        return [] if _float_eq(got, want, arrow_type) else [(path, got, want)]
    if isinstance(want, decimal.Decimal) and pa.types.is_string(arrow_type):
        return [] if got == str(want) else [(path, got, want)]
    if type(got) is not type(want) or got != want:
        return [(path, got, want)]
    return []


def specials_of(want, path="", srid=None) -> list:
    """(path, note) of what ``want`` holds that its Arrow type cannot: an
    :class:`offline_types.Special`, a geometry whose SRID is not the one its column fixes
    (``srid``; None: the column fixes none, its ``__srid`` column says each)."""
    if isinstance(want, ot.Special):
        return [(path, want.text)]
    if isinstance(want, ot.Geometry):
        return [] if srid is None or want.srid == srid else [(path, f"srid={want.srid}")]
    if isinstance(want, dict):
        return [s for k, v in want.items() for s in specials_of(v, f"{path}.{k}")]
    if isinstance(want, list):
        return [s for i, v in enumerate(want) for s in specials_of(v, f"{path}[{i}]")]
    return []


def assert_rows(table: pa.Table, rows: dict, where: str, id_column="id"):
    """Every value of ``table`` (rows keyed by ``id``) equal to the server's ``rows``;
    ``<column>__special`` set exactly where the server's value holds a :class:`Special` or
    a geometry of an SRID other than the one its column fixes, and saying so; a geometry
    column that fixes none has each value's SRID in ``<column>__srid``."""
    ids = table.column(id_column).to_pylist()
    assert sorted(ids) == sorted(rows), f"{where}: ids {ids}, server {sorted(rows)}"
    bad = []
    for name in next(iter(rows.values())):
        col = table.column(name)
        values = col.to_pylist()
        special = table.column(name + "__special").to_pylist() if name + "__special" in table.column_names \
            else [None] * len(ids)
        for rid, got, note in zip(ids, values, special, strict=True):
            want = rows[rid][name]
            bad += [(rid, name + p, g, w) for p, g, w in mismatches(got, want, col.type)]
            sp = specials_of(want, srid=COLUMN_SRIDS.get(name))
            if sp and (note is None or not all(text in note for _, text in sp)):
                bad.append((rid, name + "__special", note, sp))
            elif not sp and note is not None:
                bad.append((rid, name + "__special", note, None))
        if name in SRID_COLUMNS:    # each value's SRID (ST_SRID), null where the value is
            got = table.column(name + "__srid") if name + "__srid" in table.column_names else None
            want = [None if rows[rid][name] is None else rows[rid][name].srid for rid in ids]
            if got is None or got.type != pa.int32() or got.to_pylist() != want:
                bad.append(("*", name + "__srid", got if got is None else (str(got.type), got.to_pylist()), want))
    if bad:
        pytest.fail(f"{where}: {len(bad)} values differ from the server's:\n" +
                    "\n".join(f"  id={rid} {path}: got {g!r}, server {w!r}" for rid, path, g, w in bad[:40]),
                    pytrace=False)


# ------------------------------------------------------------------------------ Arrow types
def _range(sub):
    return pa.struct([pa.field("lower", sub), pa.field("upper", sub), pa.field("lower_inc", pa.bool_()),
                      pa.field("upper_inc", pa.bool_()), pa.field("empty", pa.bool_())])


ENUM = pa.dictionary(pa.int32(), pa.string())
PAIR = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string())])
NESTED = pa.struct([pa.field("p", PAIR), pa.field("m", ENUM), pa.field("d", pa.date32()),
                    pa.field("n", pa.decimal128(10, 2)), pa.field("tags", pa.list_(pa.string())),
                    pa.field("f", pa.float64())])
R4, RF, RD = _range(pa.int32()), _range(pa.float64()), _range(pa.date32())


class GeoArrowWKB:
    """GeoArrow's ``geoarrow.wkb`` extension type over binary with CRS ``crs``."""

    def __init__(self, crs):
        self.crs = crs

    def matches(self, t) -> bool:
        return isinstance(t, pa.ExtensionType) and t.extension_name == "geoarrow.wkb" \
            and t.storage_type == pa.binary() and json.loads(t.__arrow_ext_serialize__() or b"{}") == {"crs": self.crs}

    def __repr__(self):
        return f"geoarrow.wkb(crs={self.crs})"


#: the SRID a geometry column fixes (its typmod)
COLUMN_SRIDS = {"gp": 4326}
#: geometry columns that fix no SRID: an int32 ``<column>__srid`` beside them
SRID_COLUMNS = {"gm", "gz", "gg"}
#: the Arrow type of every column of the issue's table (docs/types.md); built-in leaves as
#: the built-ins are typed
ARROW_TYPES = {
    "structs": {
        "e": ENUM, "ea": pa.list_(ENUM), "ea2": pa.list_(pa.list_(ENUM)),
        "c": PAIR, "ca": pa.list_(PAIR), "ca2": pa.list_(pa.list_(PAIR)), "o": NESTED, "oa": pa.list_(NESTED),
        "d": PAIR, "da": pa.list_(PAIR),
        "r4": R4, "r8": _range(pa.int64()), "rn": _range(pa.string()), "rd": RD,
        "rts": _range(pa.timestamp("us")), "rtz": _range(pa.timestamp("us", tz="UTC")), "rf": RF,
        "r4a": pa.list_(R4), "r4a2": pa.list_(pa.list_(R4)), "rfa": pa.list_(RF),
        "m4": pa.list_(R4), "md": pa.list_(RD), "mf": pa.list_(RF), "m4a": pa.list_(pa.list_(R4)),
        "mda2": pa.list_(pa.list_(pa.list_(RD))),
    },
    "extensions": {
        "h": pa.map_(pa.string(), pa.string()), "ha": pa.list_(pa.map_(pa.string(), pa.string())),
        **dict.fromkeys(["ci", "lt", "lq", "isbn", "isbn13", "ean", "issn", "ismn", "upc"], pa.string()),
        "cia": pa.list_(pa.string()),
        "gp": GeoArrowWKB("EPSG:4326"), "gg": pa.binary(), "gm": pa.binary(), "gz": pa.binary(),
    },
    "vectors": {
        "v": pa.list_(pa.float32()), "hv": pa.list_(pa.float16()), "va": pa.list_(pa.list_(pa.float32())),
        "sv": pa.struct([pa.field("dim", pa.int32()), pa.field("indices", pa.list_(pa.int32())),
                         pa.field("values", pa.list_(pa.float32()))]),
    },
}


def _type_is(got, want) -> bool:
    return want.matches(got) if isinstance(want, GeoArrowWKB) else got == want


def assert_types(table: pa.Table, name: str, where: str):
    want = ARROW_TYPES[name]
    bad = [(c, table.schema.field(c).type, t) for c, t in want.items() if not _type_is(table.schema.field(c).type, t)]
    if bad:
        pytest.fail(f"{where}: Arrow types differ:\n" + "\n".join(f"  {c}: {g} (want {t})" for c, g, t in bad),
                    pytrace=False)


def assert_enum_orders(table: pa.Table, typed, name: str, where: str):
    """An enum column's dictionary: its labels in sort order (``enum_range``)."""
    for (tname, col), labels in typed.enum_labels.items():
        if tname != name:
            continue
        arr = table.column(col).combine_chunks()
        while pa.types.is_list(arr.type):
            arr = arr.flatten()
        assert arr.dictionary.to_pylist() == labels, f"{where}: {col} dictionary"


# ------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("mode", MODES)
def test_snapshots_equal_the_servers_values(captured, major, table, mode):
    typed = captured(major)
    where = f"pg{major} {mode} snapshot {table}"
    snap = snapshot(changes_of(typed, mode), f"public.{table}")
    assert_types(snap, table, where)
    assert_rows(snap, typed.final[table], where)
    assert_enum_orders(snap, typed, table, where)


@pytest.mark.parametrize("mode", MODES)
def test_net_changes_equal_the_servers_values(captured, major, table, mode):
    typed = captured(major)
    where = f"pg{major} {mode} net_changes {table}"
    net = net_changes(changes_of(typed, mode), f"public.{table}")
    ops = net.column("__OP").to_pylist()
    upserts = net.filter(pa.array([op == "upsert" for op in ops]))
    assert_types(upserts, table, where)
    assert_rows(upserts, typed.final[table], where)
    deleted = {i for i, op in zip(net.column("id").to_pylist(), ops, strict=True) if op == "delete"}
    assert deleted == ({4} if table == "structs" else set()), where


@pytest.mark.parametrize("mode", MODES)
def test_the_cli_decodes_change_rows_that_snapshot_types(captured, major, table, mode, tmp_path):
    typed = captured(major)
    where = f"pg{major} {mode} CLI decode --changes, snapshot {table}"
    snap = snapshot(cli_changes(typed, mode, tmp_path), f"public.{table}")
    assert_types(snap, table, where)
    assert_enum_orders(snap, typed, table, where)
    assert_rows(snap, typed.final[table], where)


def _evolving_changes(changes, typed, where):
    """Each change of the evolving table against the server's row right after it."""
    tc = table_changes(changes, "public.evolving")
    after = tc.column("after").combine_chunks()
    ops = tc.column("op").to_pylist()
    want = typed.evolving
    assert [(op, r["id"]) for op, r in zip(ops, after.to_pylist(), strict=True)] == \
        [(op[0], rid) for op, rid, _ in want], where
    for i, (_, rid, row) in enumerate(want):
        one = pa.Table.from_arrays([after.field(f.name)[i:i + 1] for f in after.type],
                                   names=[f.name for f in after.type])
        # columns of the image that the change's row lacks (the enum's column between its
        # drop and its return) are null
        full = {f.name: row.get(f.name) for f in after.type if not f.name.endswith("__special")}
        assert_rows(one, {rid: full}, f"{where} change {i}")
    return after


@pytest.mark.parametrize("mode", MODES)
def test_the_cli_reads_a_type_altered_mid_archive(captured, major, mode, tmp_path):
    """The composite gains an attribute: the Arrow struct holds every attribute any
    definition had, and a change made before the attribute existed has it null. The enum
    dropped and created again (a new OID): each change's label is the one it was sent
    with (the column's changes span two enum types: one dictionary holds the labels of
    both); the snapshot's column is the new enum's, its labels in their sort order."""
    typed = captured(major)
    where = f"pg{major} {mode} CLI decode --changes, evolving"
    changes = cli_changes(typed, mode, tmp_path)
    after = _evolving_changes(changes, typed, where)
    assert after.type.field("c").type == pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string()),
                                                    pa.field("z", pa.date32())]), where
    assert pa.types.is_dictionary(after.type.field("e").type), where
    snap = snapshot(changes, "public.evolving")
    assert_rows(snap, typed.final["evolving"], f"{where} snapshot")
    assert snap.column("e").combine_chunks().dictionary.to_pylist() == typed.evolving_labels[-1], where


@pytest.mark.parametrize("mode", MODES)
def test_a_type_altered_mid_archive_reads_with_the_definition_in_force(captured, major, mode):
    """The evolving table on the one-process path: each change with the definition in force."""
    typed = captured(major)
    where = f"pg{major} {mode} evolving"
    after = _evolving_changes(changes_of(typed, mode), typed, where)
    assert after.type.field("c").type == pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string()),
                                                    pa.field("z", pa.date32())]), where
    snap = snapshot(changes_of(typed, mode), "public.evolving")
    assert_rows(snap, typed.final["evolving"], f"{where} snapshot")
    assert snap.column("e").combine_chunks().dictionary.to_pylist() == typed.evolving_labels[-1], where
