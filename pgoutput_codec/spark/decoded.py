"""What the change decoders know about a DataFrame they returned, beyond its rows.

:func:`.changes.decode_changes` (and its openGauss branch) returns a lazy DataFrame
whose pass 1 already ran on the driver: the control plan it built says where the next
run resumes (``checkpoint_of``) and which transactions came twice (``replayed_of``), and
what it kept of pass 2 lets the table functions decode one table's rows again, chosen
before decoding, instead of reading the decoded rows (:class:`.pass2.Pass2`). These
facts are held here, one :class:`DecodedChanges` per DataFrame, in a registry keyed by
the DataFrame object itself (weakly: an entry goes with its DataFrame). Any
transformation gives a new DataFrame, which has none: the facts are those of the
rows exactly as returned. Classic and Spark Connect DataFrames alike are
weak-referenceable and hash by identity, and no attribute is set on them (a Spark
Connect DataFrame answers any unknown attribute with a column of that name).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from pyspark.sql import DataFrame

__all__ = ["DecodedChanges", "record", "facts_of", "pass2_of"]


@dataclass(frozen=True)
class DecodedChanges:
    """The facts of one DataFrame a change decoder returned.

    ``plan``: the pgoutput control plan (``ControlPlan``: its checkpoint and replays);
    None for openGauss rows. ``replayed``: the transactions given once because the
    archive held them twice (xid, commit LSN, seq of the second Commit), for openGauss
    rows (pgoutput's are the plan's). ``pass2``: the :class:`.pass2.Pass2` behind the
    rows (the archive, the plan and its shipped copy), when the table functions may
    decode again (FAILFAST, no observation); else None."""

    plan: object | None = None
    replayed: list = field(default_factory=list)
    pass2: object | None = None


#: DataFrame -> its DecodedChanges
_FACTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def record(df: DataFrame, facts: DecodedChanges) -> DataFrame:
    """``df``, with ``facts`` known for it."""
    _FACTS[df] = facts
    return df


def facts_of(df: DataFrame) -> DecodedChanges | None:
    """The facts of ``df`` (None: not a DataFrame a change decoder returned)."""
    try:
        return _FACTS.get(df)
    except TypeError:   # not weak-referenceable: not one of ours
        return None


def pass2_of(df: DataFrame):
    """The :class:`.pass2.Pass2` a DataFrame comes straight from (None: another
    DataFrame, or one cached: then its rows are read as they are)."""
    facts = facts_of(df)
    if facts is None or facts.pass2 is None or getattr(df, "is_cached", False):
        return None
    return facts.pass2
