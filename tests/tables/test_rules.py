"""The replay rules of pgoutput_codec.tables.rules, each named once: every rule is a
function stated by its docstring and listed in the module's, and each does what it
states on the raw (kind, data) images the replay holds. Their Spark twins, and the
parity of the two, are tested in tests/spark/test_rules_spark.py."""

from __future__ import annotations

import inspect

import pyarrow as pa
import pytest

from pgoutput_codec.tables import rules
from pgoutput_codec.tables.replay import HeldRows
from pgoutput_codec.arrays import kind_bytes


def t(v) -> tuple:
    return ("t", str(v).encode())


U = ("u", None)
NULL = ("n", None)


def col(name, key=False):
    return {"name": name, "flags": int(key), "type_oid": 23, "type_modifier": -1}


@pytest.mark.parametrize("rule", rules.RULES)
def test_every_rule_is_a_function_stated_once(rule):
    fn = getattr(rules, rule)
    assert inspect.isfunction(fn) and fn.__module__ == rules.__name__, rule
    assert fn.__doc__ and len(fn.__doc__.split()) > 10, rule
    assert f":func:`{rule}`" in rules.__doc__, rule
    assert rule in rules.__all__, rule


def test_the_rules_are_listed_once():
    assert len(set(rules.RULES)) == len(rules.RULES)
    listed = [line.split("`")[1] for line in rules.__doc__.splitlines() if line.startswith("- :func:`")]
    assert listed == list(rules.RULES)


def test_identity_key_is_the_flagged_columns_or_the_whole_row():
    assert rules.identity_key([col("id", True), col("v")]) == ("id",)
    assert rules.identity_key([col("id"), col("v")]) == ("id", "v")          # NOTHING, no primary key
    assert rules.identity_key([col("id", True), col("v", True)]) == ("id", "v")   # FULL
    assert rules.identity_key([]) == ()


def test_row_key_reads_a_column_the_image_lacks_as_null():
    assert rules.row_key({"id": t(1), "v": t("a")}, ("id", "w")) == (t(1), NULL)
    assert rules.row_key({"id": ("t", b"1", (20, -1))}, ("id",)) == (t(1),)   # a value held with its own type


def test_unknown_key_error_names_the_table_the_commit_and_the_way_out():
    text = rules.unknown_key_error("public.t", 130)
    assert text.startswith("public.t: an Update committed at 130 carries no old key") and "keys=" in text


def test_found_keys_names_held_rows_by_the_key_of_the_change():
    held = HeldRows(None)
    held.rekey(("id",))
    held.store = {(t(1),): {"id": t(1), "v": t("a")}, (t(2),): {"id": t(2), "v": U}}
    rules.found_keys(held, ("id", "v"))      # ALTER TABLE … REPLICA IDENTITY FULL
    assert set(held.store) == {(t(1), t("a")), (t(2), U)}
    assert held.vague == {(t(2), U)}          # a key with a value no change said
    assert held.keycols == ("id", "v")


def test_found_keys_makes_rows_a_dropped_column_told_apart_alike():
    held = HeldRows(None, alike=True)
    held.rekey(("k", "v", "w"))
    held.store = {(t(1), t("a"), t(1)): {"k": t(1), "v": t("a")}, (t(1), t("a"), t(2)): {"k": t(1), "v": t("a")}}
    rules.found_keys(held, ("k", "v"))
    assert held.count == {(t(1), t("a")): 2} and len(held.rows()) == 2


def test_key_move():
    assert rules.key_move((t(1),), (t(5),)) and not rules.key_move((t(1),), (t(1),))


def test_carry_toast_takes_the_old_image_then_the_row_held():
    after = {"id": t(1), "big": U, "other": U, "v": t("b")}
    before = {"id": t(1), "big": t("BIG"), "other": U, "v": t("a")}     # FULL: TOAST values inline
    held = {"id": t(1), "big": t("old"), "other": t("o"), "v": t("a")}
    assert rules.carry_toast(after, before, held) == {"id": t(1), "big": t("BIG"), "other": t("o"), "v": t("b")}
    # a row older than the changes: the value stays unsaid
    assert rules.carry_toast(after, None, None) == after


def test_gone_is_the_row_held_under_the_key_its_old_image_sends():
    held = {"id": t(1), "v": t("a")}
    assert rules.gone(held, {"id": t(1), "v": NULL}, ("id",)) == held
    assert rules.gone(None, {"id": t(3), "v": NULL}, ("id",)) == {"id": t(3)}     # a row never seen
    assert rules.gone(None, {"id": t(3), "v": U}, ("id", "v")) == {"id": t(3)}   # an unsaid value is not sent


def test_same_copy():
    row = {"id": t(1), "v": t("a")}
    assert rules.same_copy("R", dict(row), row, alike=False)
    assert not rules.same_copy("R", {"id": t(1), "v": t("b")}, row, alike=False)
    assert not rules.same_copy("I", dict(row), row, alike=False)
    assert not rules.same_copy("R", dict(row), row, alike=True)        # one more row alike


def test_end_versions_ends_every_version_of_a_key_or_the_oldest_of_rows_alike():
    versions = [[(t(1),), {}, "I", 10, 1, None, None], [(t(1),), {}, "I", 20, 2, None, None]]
    open_ver = {(t(1),): [0, 1]}
    rules.end_versions(versions, open_ver, (t(1),), 30, 3, one=True)
    assert [v[5] for v in versions] == [30, None] and open_ver == {(t(1),): [1]}
    rules.end_versions(versions, open_ver, (t(1),), 40, 4)
    assert [v[5] for v in versions] == [30, 40] and open_ver == {}


def test_after_truncate_keeps_the_changes_after_the_last_one():
    rows = pa.table({"op": ["I", "T", "I", "T", "I", "U"], "commit_lsn": pa.array([1, 2, 3, 4, 5, 6], pa.uint64()),
                     "commit_ts": pa.array([10, 20, 30, 40, 50, 60], pa.int64())})
    later, op, truncated = rules.after_truncate(rows, kind_bytes(rows.column("op").combine_chunks()))
    assert bytes(op) == b"IU" and later.column("commit_lsn").to_pylist() == [5, 6]
    assert truncated == (4, 40)
    same, _, none = rules.after_truncate(later, op)
    assert same is later and none is None


def test_count_alike_nets_rows_added_and_removed():
    a, b = {"k": t(1)}, {"k": t(2)}

    def ikey(img):
        return rules.row_key(img, ("k",))
    counted = [(a, 1, (10, 1)), (a, 1, (10, 1)), (b, -1, (20, 2)), (a, -1, (30, 3)), (b, 1, (40, 4))]
    got = rules.count_alike(counted, ["k"], ikey)
    assert got == [((30, 3), "upsert", a, None, [])]      # b removed then added: nothing


def test_as_added_takes_a_readded_column_s_values_out_of_the_rows_held():
    store = {(t(1),): {"id": t(1), "b": t(10), "c": t("c1")}}
    rules.as_added(store, ["id", "b", "c"], ["id", "c"])          # b dropped: nothing added
    assert store[(t(1),)]["b"] == t(10)
    rules.as_added(store, ["id", "c"], ["id", "c", "b"])          # b added again: a new column
    assert store == {(t(1),): {"id": t(1), "c": t("c1")}}
    assert rules.added_columns(["id", "a", "c"], ["id", "c", "a"]) == ["a"]     # dropped and added in one


def test_net_key_is_the_columns_every_identity_held():
    default, full = [col("id", True), col("v")], [col("id", True), col("v", True)]
    assert rules.net_key([default, full], full) == ["id"]
    assert rules.net_key([[col("id"), col("u", True)]], default) == ["id"]     # none in common: the newest


def test_warn_incomplete_only_without_copied_rows_or_a_truncate():
    rows = pa.table({"op": ["I", "U"]})
    with pytest.warns(rules.IncompleteTableWarning, match="public.t: rows that existed before capture"):
        rules.warn_incomplete(rows, "public.t")
    for ops in (["R", "U"], ["T", "I"]):
        assert not rules.start_unknown(pa.table({"op": ops}))
