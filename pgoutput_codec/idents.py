"""Qualified table names as PostgreSQL writes them: ``schema.table``, an identifier in
double quotes when it holds a dot or a quote (``"sales.eu".orders``, ``"a""b".c``), or a
(schema, table) pair. PostgreSQL allows any character in a quoted identifier, so an
unquoted name with several dots may name more than one table: it is resolved against the
tables there are, and refused when it matches none or several."""

from __future__ import annotations

__all__ = ["parse_name", "qualified_name", "quote_ident", "resolve_name", "split_parts", "free_name"]


def quote_ident(ident: str) -> str:
    """``ident`` as it reads back from a qualified name: in double quotes (a quote
    doubled) when it holds a dot or a quote, else as it is."""
    return '"' + ident.replace('"', '""') + '"' if "." in ident or '"' in ident else ident


def qualified_name(schema: str, table: str) -> str:
    """The name of ``schema.table`` that :func:`parse_name` reads back as that one pair
    (plain names, ``public.orders``, as they are)."""
    return f"{quote_ident(schema)}.{quote_ident(table)}"


def split_parts(name: str) -> list[tuple[str, bool]]:
    """The dot-separated parts of ``name``: (text, quoted), a quoted part's doubled quotes
    made one. A malformed name (an unclosed quote, text after a closing quote, an empty
    part) is a ValueError naming it."""
    parts, k, n = [], 0, len(name)
    while True:
        if k < n and name[k] == '"':
            text, k = [], k + 1
            while True:
                end = name.find('"', k)
                if end < 0:
                    raise ValueError(f"table name {name!r}: a quoted identifier is not closed")
                text.append(name[k:end])
                k = end + 1
                if k < n and name[k] == '"':     # "" inside quotes: one quote
                    text.append('"')
                    k += 1
                    continue
                break
            part = "".join(text)
            if k < n and name[k] != ".":
                raise ValueError(f"table name {name!r}: text after a closing quote at {k}")
            quoted = True
        else:
            end = name.find(".", k)
            end = n if end < 0 else end
            part, k, quoted = name[k:end], end, False
        if not part:
            raise ValueError(f"table name {name!r}: an empty identifier")
        parts.append((part, quoted))
        if k >= n:
            return parts
        k += 1                                   # the dot
        if k >= n:
            raise ValueError(f"table name {name!r}: an empty identifier after the last dot")


def _joined(parts) -> str | None:
    """Parts read as one identifier: one part, or unquoted parts with their dots."""
    if len(parts) == 1:
        return parts[0][0]
    return None if any(q for _, q in parts) else ".".join(p for p, _ in parts)


def parse_name(name) -> list[tuple[str, str]]:
    """Every (schema, table) that ``name`` may name (``public`` when no schema is
    given): one for a pair, a name with one dot, or one whose dotted identifiers are
    quoted; one per dot for an unquoted name with several (``a.b.c``: ``a``.``b.c``
    and ``a.b``.``c``)."""
    if isinstance(name, tuple):
        if len(name) != 2 or not all(isinstance(p, str) and p for p in name):
            raise ValueError(f"table name {name!r}: a (schema, table) pair of non-empty strings is wanted")
        return [name]
    if not isinstance(name, str):
        raise TypeError(f"table name {name!r}: a str or a (schema, table) pair is wanted")
    parts = split_parts(name)
    if len(parts) == 1:
        return [("public", parts[0][0])]
    out = []
    for k in range(1, len(parts)):
        schema, table = _joined(parts[:k]), _joined(parts[k:])
        if schema is not None and table is not None:
            out.append((schema, table))
    if not out:
        raise ValueError(f"table name {name!r}: quote the schema and the table as PostgreSQL does "
                         '("sales.eu".orders)')
    return out


def resolve_name(name, known) -> tuple[str, str]:
    """The one (schema, table) ``name`` names among ``known`` (the (schema, table)
    pairs there are): a name that can name one table only is that table, there or
    not; one that may name several (an unquoted name with several dots) must match
    exactly one of ``known``, or is a ValueError saying how to quote it."""
    cands = parse_name(name)
    if len(cands) == 1:
        return cands[0]
    hits = [c for c in cands if c in known]
    if len(hits) == 1:
        return hits[0]
    how = " or ".join(qualified_name(*c) for c in (hits or cands))
    if not hits:
        raise ValueError(f"table name {name!r} matches no table (a dotted schema or table is quoted: {how})")
    raise ValueError(f"table name {name!r} matches {len(hits)} tables: name one, {how}")


def free_name(name: str, taken) -> str:
    """``name``, or ``_`` + it as often as needed to bear a name ``taken`` lacks: the
    name of a column of our own (``history``'s ``__OP``, a batch's control columns)
    beside a table's columns, which may bear it. The one rule for every such column."""
    while name in taken:
        name = "_" + name
    return name
