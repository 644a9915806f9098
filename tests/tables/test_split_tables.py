"""Many tables' change rows split once by table (``tables.rows.split_tables``): each table
rebuilt from its group alone is the table rebuilt from every table's rows, over tables
dropped, created again, renamed and swapped, and over the real-server corpus."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import table_moves as TM
from change_cases import SETS, archive, enc, registry_for, renamed_archive, same_values, staggered_archive

from pgoutput_codec import decode_changes
from pgoutput_codec.idents import qualified_name
from pgoutput_codec.selection import parse_table_list
from pgoutput_codec.tables import net_changes, snapshot
from pgoutput_codec.tables.rows import relations_named, split_tables


def _same_everywhere(changes: pa.Table, registry=None):
    groups = split_tables(changes)
    names = sorted(groups)
    assert names
    for name in names:
        assert len(groups[name]) <= len(changes)
        for f in (net_changes, snapshot):
            got, want = f(groups[name], name, registry=registry), f(changes, name, registry=registry)
            assert got.schema.equals(want.schema), name
            assert all(same_values(got.column(j), want.column(j)) for j in range(want.num_columns)), name
    return groups


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("scenario", sorted(TM.SCENARIOS))
def test_each_moved_table_from_its_group_alone(scenario):
    msgs, _ = TM.messages(TM.SCENARIOS[scenario])
    groups = _same_everywhere(decode_changes(pa.array(enc(msgs), pa.binary())))
    assert set(groups) == {f"public.{t}" for t in TM.tables(TM.SCENARIOS[scenario])}


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_relation_renamed_across_names_is_in_each_group():
    values, _ = renamed_archive()
    changes = decode_changes(values[4:])   # from its first Relation on
    groups = _same_everywhere(changes)
    assert 16400 in set(groups["public.t"].column("relation_id").to_pylist())
    assert 16400 in set(groups["public.t_old"].column("relation_id").to_pylist())


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("version,option_set", [s for s in SETS if s[0].startswith("15")][:3])
def test_corpus_tables_from_their_groups(version, option_set):
    changes = decode_changes(archive(version, option_set), registry=registry_for(version))
    groups = _same_everywhere(changes, registry_for(version))
    assert sum(len(g) for g in groups.values()) >= len(changes.filter(pa.compute.is_valid(changes["table"])))


def test_patterns_select_names_and_rows_without_relation_ids_stay_with_their_name():
    got = relations_named({(1, "public", "a"), (2, "public", "b"), (None, "s", "c"), (1, "public", "a2")},
                          [("public", "a*")])
    assert got == {"public.a": frozenset({1}), "public.a2": frozenset({1})}
    got = relations_named({(None, "s", "c"), (None, "s", "d"), (1, "s", "x"), (3, "t", None)})
    assert got == {"s.c": frozenset({None}), "s.d": frozenset({None}), "s.x": frozenset({1})}


def _by_scan(changes: pa.Table, patterns=None) -> dict:
    """Each name's rows found by a scan of every row: the rows of its relations, and the
    rows with no relation id under its name, in the rows' order."""
    rel, sch, tbl = (changes.column(c).to_pylist() for c in ("relation_id", "schema", "table"))
    out = {}
    for name, members in relations_named(set(zip(rel, sch, tbl, strict=True)), patterns).items():
        at = [i for i, (r, s, t) in enumerate(zip(rel, sch, tbl, strict=True))
              if (r in members if r is not None else None in members and t is not None and qualified_name(s, t) == name)]
        out[name] = changes.take(pa.array(at, pa.int64()))
    return out


def _mixed_changes() -> pa.Table:
    """Change rows of several chunks: a relation renamed across two names (its rows in
    both groups), a dozen tables each one relation, t7's first row under no name (a
    relation id alone), and rows with no relation id, as openGauss's: all of t3's, the
    later half of t5's (a name with both)."""
    renamed = decode_changes(renamed_archive()[0][4:])
    many = decode_changes(staggered_archive(12)[0], errors="collect")
    tbl = np.array(many.column("table").to_pylist(), dtype=object)
    nameless = (tbl == "t3") | ((tbl == "t5") & (np.arange(len(many)) >= np.flatnonzero(tbl == "t5")[2]))
    unnamed = np.arange(len(many)) == np.flatnonzero(tbl == "t7")[0]
    rel = pc.add(many.column("relation_id"), pa.scalar(1000, pa.uint32())).combine_chunks()
    for name, values in (("relation_id", pa.array(rel.to_numpy(zero_copy_only=False), rel.type, mask=nameless)),
                         ("schema", pc.if_else(pa.array(unnamed), None, many.column("schema"))),
                         ("table", pc.if_else(pa.array(unnamed), None, many.column("table")))):
        many = many.set_column(many.schema.get_field_index(name), name, values)
    return pa.concat_tables([many.slice(0, 40), renamed, many.slice(40), renamed.slice(0, 5)])


@pytest.mark.parametrize("tables", [None, "public.t*", "public.t_old,public.t1,public.t3,public.t5"])
def test_each_group_is_its_rows_found_by_a_scan(tables):
    """Groups sliced from one copy in table order (a table's own relations), taken apart
    (a relation under two names) and of rows with no relation id are each exactly its
    rows found row by row, in order, with the rows' types."""
    changes = _mixed_changes()
    assert changes.column("relation_id").num_chunks > 1 and changes.column("relation_id").null_count
    patterns = parse_table_list(tables)
    groups, want = split_tables(changes, patterns), _by_scan(changes, patterns)
    assert list(groups) == list(want) and len(groups) > 3
    for name, rows in want.items():
        assert groups[name].schema.equals(changes.schema), name
        assert groups[name].to_pylist() == rows.to_pylist(), name
    if tables is None:
        assert {"public.t", "public.t_old", "public.t3", "public.t5"} <= set(groups)
        assert 16400 in groups["public.t"].column("relation_id").to_pylist()
        assert 16400 in groups["public.t_old"].column("relation_id").to_pylist()
        assert None in groups["public.t7"].column("table").to_pylist()


def test_a_table_holding_every_row_is_the_rows_themselves():
    changes = decode_changes(staggered_archive(1)[0], errors="collect")
    assert split_tables(changes) == {"public.t0": changes}
    assert split_tables(changes)["public.t0"] is changes
