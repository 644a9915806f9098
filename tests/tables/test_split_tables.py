"""Many tables' change rows split once by table (``tables.rows.split_tables``): each table
rebuilt from its group alone is the table rebuilt from every table's rows, over tables
dropped, created again, renamed and swapped, and over the real-server corpus."""

from __future__ import annotations

import pyarrow as pa
import pytest
import table_moves as TM
from change_cases import SETS, archive, enc, registry_for, renamed_archive, same_values

from pgoutput_codec import decode_changes
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
