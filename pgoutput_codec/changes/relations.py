"""Tables over time, from their Relation versions: which relation bears a table's name
(a table dropped and created again, or renamed, is another relation under the name) and
a table's columns over all its versions."""

from __future__ import annotations

from ..idents import parse_name, qualified_name, resolve_name

__all__ = ["split_name", "one_bearer", "bearer", "merge_columns"]


def split_name(name, known=None) -> tuple:
    """Table ``name`` (``schema.table``, identifiers quoted as PostgreSQL quotes them, or
    a (schema, table) pair; ``public`` when no schema is given) as a pair.
    ``known``: the (schema, table) pairs there are, which an unquoted name with several
    dots must match one of (:func:`~pgoutput_codec.idents.resolve_name`)."""
    if known is not None:
        return resolve_name(name, known)
    cands = parse_name(name)
    if len(cands) > 1:
        raise ValueError(f"table name {name!r} may name {len(cands)} tables: quote it as PostgreSQL does, "
                         + " or ".join(qualified_name(*c) for c in cands))
    return cands[0]


def one_bearer(versions: list) -> list:
    """The versions of the one relation that ever bore the name, when it never bore
    another (the common case: no order to look at); else []."""
    named = {r for r, ok in versions if ok}
    mine = [k for k, (r, _) in enumerate(versions) if r in named]
    return mine if len(named) == 1 and all(versions[k][1] for k in mine) else []


def bearer(versions: list, last: list) -> tuple:
    """The rule ``tables`` resolves a name by (Spark's versions job over any DataFrame too;
    ``ControlPlan.bearer`` walks the same rule over Relation messages, and
    tests/test_changes.py holds the two to one answer as of every commit):
    ``versions`` is one (relation, named so) per Relation version, ``last`` the
    position of each version's last change (comparable; None: none). The relation
    last changed under the name bears it, unless it has been changed under another
    since (renamed away: then none the changes show does). Gives (the indexes of the
    bearer's versions, whether another relation bore the name)."""
    named = {r for (r, ok), at in zip(versions, last, strict=True) if ok and at is not None}
    last_named, newest = {}, {}   # relation -> position of its newest change under the name / at all
    for (r, ok), at in zip(versions, last, strict=True):
        if at is None:
            continue
        if r not in newest or newest[r] < at:
            newest[r] = at
        if ok and (r not in last_named or last_named[r] < at):
            last_named[r] = at
    if not last_named:
        return [], False
    holder = max(last_named, key=last_named.get)
    if newest[holder] != last_named[holder]:
        return [], False
    return [k for k, (r, _) in enumerate(versions) if r == holder], len(named) > 1


def merge_columns(reps: list, last) -> list[dict]:
    """Columns over several Relation versions (``reps``: their column lists), newest
    definition of each column winning, in the order of ``last`` (the newest version;
    columns dropped later keep their place at the end)."""
    seen: dict[str, dict] = {}
    order: list[str] = []
    for cols in reps:
        for c in cols or ():
            seen[c["name"]] = c
            if c["name"] not in order:
                order.append(c["name"])
    if last is not None:
        newest = [c["name"] for c in last]
        order = newest + [n for n in order if n not in newest]
        for c in last:
            seen[c["name"]] = c
    return [seen[n] for n in order]
