"""``snapshot`` with a base: the base's rows with the table's net changes after it applied
(:mod:`.base`). Above ``net`` (it takes net changes), so apart from ``replay``'s
``snapshot``, which it calls when there is no base."""

from __future__ import annotations

import pyarrow as pa

from . import replay
from .base import KNOWN, base_for, snapshot_over_base
from .net import net_changes
from .rows import rows_of

__all__ = ["snapshot"]


def snapshot(changes: pa.Table, name: str, as_of_lsn: int | None = None, *, registry=None,
             missing: dict | None = None, base=None, base_lsn=None) -> pa.Table:
    b, b_lsn = base_for(base, base_lsn, name)
    if b is None:
        return replay.snapshot(changes, name, as_of_lsn, registry=registry, missing=missing, base=base)
    return snapshot_over_base(rows_of(changes, name, as_of_lsn), name, as_of_lsn, lambda later: net_changes(
        later, name, registry=registry, missing=missing, base=KNOWN), b, b_lsn)


snapshot.__doc__ = replay.snapshot.__doc__
