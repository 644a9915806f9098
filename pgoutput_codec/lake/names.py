"""Where a table's Delta copy lives: one directory per table under the target, named by
an encoding of the table's qualified name that deltalake reads back as it wrote it.

deltalake percent-decodes local paths (``%XX``), once when it writes and once more when
it reads the log, so a directory name holding ``%`` is written to one place and looked
for in another. The names here hold letters, digits, ``_``, ``-`` and ``.`` as they are
and every other byte of the UTF-8 name as ``~XX`` (``~`` is left alone by URLs and by
deltalake), a leading ``.`` too; a name whose directory would pass :data:`MAX_BYTES`
keeps a prefix and ends in ``~~`` and a digest of the whole name (no escaped name holds
``~~``), so no two names share a directory."""

from __future__ import annotations

import hashlib
import os
import string
import urllib.parse

from ..idents import qualified_name
from ..typecatalog.companions import owner

__all__ = ["dir_name", "lake_dir", "copy_dir", "column_names", "MAX_BYTES"]

#: the longest directory name (bytes) written: a file system's limit is 255
MAX_BYTES = 200
_KEEP = frozenset(string.ascii_letters + string.digits + "_-.")
_DIGEST = 32     # hex digits of SHA-256 kept: 128 bits


def dir_name(name: str) -> str:
    """The directory of the copy of table ``name`` (its :func:`qualified_name`): plain
    names (``public.orders``) as they are."""
    out = [ch if ch in _KEEP and not (k == 0 and ch == ".") else "".join(f"~{b:02X}" for b in ch.encode())
           for k, ch in enumerate(name)]
    d = "".join(out)
    if len(d) <= MAX_BYTES:
        return d
    head = d[:MAX_BYTES - 2 - _DIGEST]
    tilde = head.rfind("~")
    if tilde > len(head) - 3:             # not in the middle of an escape
        head = head[:tilde]
    return head + "~~" + hashlib.sha256(name.encode()).hexdigest()[:_DIGEST]


def lake_dir(target) -> str:
    """``target`` as a local path deltalake reads back where it writes: one that holds
    no ``%XX`` escape (deltalake would decode it, and not the same number of times when
    it writes and reads), else a ValueError naming it."""
    path = os.fspath(target)
    if not isinstance(path, str):
        path = os.fsdecode(path)
    full = os.path.abspath(path)
    if urllib.parse.unquote(full) != full:
        raise ValueError(f"lake target {full!r}: deltalake percent-decodes local paths, so a copy under a path "
                         "holding a %XX escape is written to one place and read from another; choose a path "
                         "without one")
    return path


def copy_dir(target, schema: str, table: str) -> str:
    """The directory of table ``schema.table``'s copy under ``target``."""
    return os.path.join(lake_dir(target), dir_name(qualified_name(schema, table)))


def column_names(names: list[str], held) -> dict[str, str]:
    """Each column of ``names`` (a batch's, in the table's order) -> its name in a copy
    whose columns are ``held``: its own, unless Delta (whose column names are
    case-insensitive) would take it for another: of columns named alike but for case,
    one held keeps its name (the copy keeps a column the batch no longer sends, as
    ``id`` after ``RENAME COLUMN id TO "ID"``), else the first in the table's order; the
    others are named ``name~`` + 8 hex digits of their name's SHA-256 (the same name
    each run). A companion (``c__special``, ``c__srid``) follows column ``c``."""
    held = set(held)
    every = held.union(names)
    if len({n.lower() for n in every}) == len(every):
        # no two columns alike but for case: each keeps its name (a companion its
        # column's name and its own ending, which is its own name)
        return {n: n for n in names}
    # a Delta table's columns are case-insensitively distinct: one held name per lower form
    first: dict[str, str] = {h.lower(): h for h in held}
    for n in names:
        first.setdefault(n.lower(), n)
    out = {}
    for n in names:
        if owner(n, names) is not None:
            continue
        mine = first[n.lower()] == n
        out[n] = n if mine else f"{n}~{hashlib.sha256(n.encode()).hexdigest()[:8]}"
    for n in names:
        if n not in out:
            out[n] = out[owner(n, names)] + n[len(owner(n, names)):]
    taken = [v.lower() for v in out.values()] + [h.lower() for h in held - set(out.values())]
    if len(set(taken)) < len(taken):
        raise ValueError(f"columns {sorted(names)}: no case-insensitively distinct names for them in a Delta table")
    return out
