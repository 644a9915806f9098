"""What a numeric type modifier says (precision, scale), and a value fitted to it."""

from __future__ import annotations

import decimal

__all__ = ["numeric_typmod", "decimal_to_typmod"]


def numeric_typmod(type_modifier: int) -> tuple[int, int] | None:
    """(precision, scale) of a numeric typmod, None when unconstrained. The scale is an
    11-bit signed field since PostgreSQL 15 (``numeric.c``: NUMERIC_TYPMOD_SCALE), so
    ``numeric(5,-2)`` decodes to (5, -2); older servers only produce scales >= 0."""
    if type_modifier is None or type_modifier < 4:
        return None
    t = type_modifier - 4
    return (t >> 16) & 0xFFFF, ((t & 0x7FF) ^ 1024) - 1024


def decimal_to_typmod(d: decimal.Decimal, tm):
    """``d`` at the scale of numeric typmod ``tm``; ValueError when that loses digits or
    exceeds its precision (a value the column cannot have held)."""
    ps = numeric_typmod(tm)
    p, s = ps
    with decimal.localcontext() as ctx:
        ctx.prec = 2000
        q = d.quantize(decimal.Decimal(1).scaleb(-s))
        if q != d:
            raise ValueError(f"more fraction digits than the column's scale {s}")
        if abs(q.scaleb(s)) >= 10 ** p:
            raise ValueError(f"exceeds the column's precision {p}")
    return q
