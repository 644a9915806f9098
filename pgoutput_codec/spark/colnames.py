"""A table's column names inside the Spark plans of ``snapshot``, ``history`` and
``net_changes``, and the user's names restored at the end.

Spark resolves names case-insensitively (``spark.sql.caseSensitive`` is false by
default, and the user's session setting is left alone), so a reference to field ``Id``
of a row holding ``Id`` and ``ID`` is ambiguous; a name holding a backtick cannot be
quoted in a column path; and a table column may bear the name of one of our own
columns (``__OP``). Inside the plans the row struct's fields bear inner names, unique
without regard to case and free of backticks (:func:`inner_names`: a name that needs
none keeps its own), our own top-level columns names no field bears
(:func:`own_name`); the results take the user's names by position at the end, as the
single-process functions give them."""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["Inner", "inner_names", "to_inner", "own_name", "renamed_strings", "user_struct", "SPECIAL"]

SPECIAL = "__special"


class Inner(NamedTuple):
    """A table's row struct under the user's names (``user``) and the inner name of each
    of its fields (``inner``: user name -> inner name; the same name where it needs no
    other)."""

    user: T.StructType
    inner: dict

    @property
    def renamed(self) -> bool:
        return any(k != v for k, v in self.inner.items())

    def outer(self, name: str) -> str:
        """The user's name of the field inner name ``name`` names."""
        return self._outer().get(name, name)

    def _outer(self) -> dict:
        return {v: k for k, v in self.inner.items()}

    def spans(self, spans: list | None) -> list | None:
        """:func:`.spans.column_spans`' spans under the inner names."""
        return None if spans is None else [([self.inner.get(n, n) for n in names], last) for names, last in spans]


def inner_names(names: list[str]) -> dict[str, str]:
    """Each field of a row struct (``names``, the user's) -> the name the plans refer to it
    by: its own when no other field bears it but for case and it holds no backtick; else
    (every field after the first of one name but for case, a name with a backtick) the
    name with backticks as ``_`` and ``~`` + 8 hex digits of its SHA-256, ``~`` more
    until no field bears it. A ``c__special`` note follows column ``c``."""
    base = [n for n in names if not (n.endswith(SPECIAL) and n[:-len(SPECIAL)] in names)]
    taken = {n.lower() for n in names}
    seen: set = set()
    out = {}
    for n in base:
        if "`" not in n and n.lower() not in seen:
            out[n] = n
        else:
            m = n.replace("`", "_") + "~" + hashlib.sha256(n.encode()).hexdigest()[:8]
            while m.lower() in taken or (m + SPECIAL).lower() in taken:
                m += "~"
            taken.update((m.lower(), (m + SPECIAL).lower()))
            out[n] = m
        seen.add(n.lower())
    for n in names:
        if n not in out:
            out[n] = out[n[:-len(SPECIAL)]] + SPECIAL
    if len({v.lower() for v in out.values()}) < len(out):
        raise ValueError(f"columns {sorted(names)}: no names unique but for case for them in a Spark plan")
    return out


def own_name(name: str, fields) -> str:
    """``name`` (one of our own top-level columns), or ``_`` + it as often as needed to
    bear a name no field of ``fields`` bears, without regard to case (Spark's)."""
    taken = {f.lower() for f in fields}
    while name.lower() in taken:
        name = "_" + name
    return name


def renamed_strings(col: Column, mapping: dict) -> Column:
    """An array of column names, each renamed by ``mapping`` (the others as they are)."""
    pairs = [(k, v) for k, v in mapping.items() if k != v]
    if not pairs:
        return col

    def one(x):
        out = None
        for k, v in pairs:
            out = (F.when(x == F.lit(k), F.lit(v)) if out is None else out.when(x == F.lit(k), F.lit(v)))
        return out.otherwise(x)
    return F.transform(col, one)


def user_struct(col: Column, inner_type: T.StructType, names) -> Column:
    """A struct column of ``inner_type`` with its fields named ``names`` (by position: a
    cast from one struct to another renames)."""
    return col.cast(T.StructType([T.StructField(n, f.dataType, f.nullable)
                                  for n, f in zip(names, inner_type.fields, strict=True)]))


def to_inner(tc: DataFrame) -> tuple[DataFrame, Inner]:
    """``table_changes``' rows with ``before``/``after`` under the inner names and
    ``unchanged`` naming them so; and the :class:`Inner` of the row struct."""
    user = tc.schema["after"].dataType
    inner = inner_names(user.names)
    names = Inner(user, inner)
    if not names.renamed:
        return tc, names
    target = [inner[n] for n in user.names]
    return (tc.withColumn("before", user_struct(F.col("before"), user, target))
            .withColumn("after", user_struct(F.col("after"), user, target))
            .withColumn("unchanged", renamed_strings(F.col("unchanged"), inner))), names
