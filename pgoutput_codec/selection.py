"""Which changes a run gives: the table list (openGauss's white-table-list syntax) and the
commit-LSN window of an incremental run or a replay up to a point."""

from __future__ import annotations

import fnmatch

import numpy as np
import pyarrow.compute as pc

from .arrays import one_array
from .idents import parse_name, split_parts
from .pgoutput.messages import parse_lsn

__all__ = ["parse_table_list", "table_selected", "commit_window", "intersect_windows", "in_commit_window"]


def parse_table_list(spec):
    """openGauss white-table-list syntax (``public.t1,*.t3,my_schema.*``) to (schema, table)
    glob pairs; ``None``/empty means every table. An identifier with a dot or a quote is
    quoted as PostgreSQL quotes it (``"sales.eu".*``, ``public."a""b"``); an unquoted item
    with several dots stands for each way of reading it (``a.b.c``: ``a``.``b.c`` and
    ``a.b``.``c``); one quoted identifier alone is a schema (``"s"``: every table of
    ``s``), one unquoted a table of any schema."""
    if spec is None:
        return None
    items = spec if isinstance(spec, (list, tuple)) else _items(spec)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        parts = split_parts(item)
        if len(parts) == 1:
            out.append((parts[0][0], "*") if parts[0][1] else ("*", parts[0][0]))
            continue
        out.extend(p for p in parse_name(item) if p not in out)
    return out or None


def _items(spec: str) -> list[str]:
    """``spec`` split at its commas outside double quotes."""
    items, start, quoted = [], 0, False
    for k, ch in enumerate(spec):
        if ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            items.append(spec[start:k])
            start = k + 1
    return items + [spec[start:]]


def _lsn_bound(v):
    """An LSN given as an int (NumPy's too), a ``Decimal`` (Spark's ``max(commit_lsn)``),
    decimal digits or ``X/Y`` text."""
    if v is None:
        return None
    if isinstance(v, str):
        return int(v) if v.strip().isdigit() else parse_lsn(v.strip())
    if isinstance(v, float) or int(v) != v:
        raise ValueError(f"not an LSN: {v!r}")
    return int(v)


def commit_window(after_lsn=None, until_lsn=None):
    """The commit-LSN window ``(after_lsn, until_lsn]`` (ints, Decimals or ``X/Y`` text;
    None: an open end) as a pair of ints or None, or None when both ends are open: the
    transactions whose commit LSN lies in it are the ones given."""
    after, until = _lsn_bound(after_lsn), _lsn_bound(until_lsn)
    if after is not None and until is not None and until < after:
        raise ValueError(f"until_lsn {until_lsn} is before after_lsn {after_lsn}")
    return None if after is None and until is None else (after, until)


def intersect_windows(w0, w1):
    """The intersection of two commit windows (None: unbounded)."""
    (a0, u0), (a1, u1) = w0 or (None, None), w1 or (None, None)
    a = max((v for v in (a0, a1) if v is not None), default=None)
    u = min((v for v in (u0, u1) if v is not None), default=None)
    return None if a is None and u is None else (a, u)


def in_commit_window(commit_lsn, window) -> np.ndarray:
    """Per commit LSN (uint64 Arrow array, chunked or not; null: outside): inside ``window``."""
    lsn = one_array(commit_lsn)
    inside = lsn.is_valid().to_numpy(zero_copy_only=False)
    v = pc.fill_null(lsn, 0).to_numpy(zero_copy_only=False)
    after, until = window
    if after is not None:
        inside &= v > np.uint64(after)
    if until is not None:
        inside &= v <= np.uint64(until)
    return inside


def table_selected(patterns, schema: str, table: str) -> bool:
    """Whether ``schema.table`` is among ``patterns`` (:func:`parse_table_list`; None: all)."""
    if patterns is None:
        return True
    return any(fnmatch.fnmatchcase(schema, s) and fnmatch.fnmatchcase(table, t) for s, t in patterns)
