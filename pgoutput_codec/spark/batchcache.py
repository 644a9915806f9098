"""One decode per Arrow batch, shared by the scalar field UDFs evaluated on it.

Spark evaluates the Python UDFs of one projection in one Python worker, batch by batch,
each UDF called in turn with its own arguments. When every field of a decoded row is its
own UDF (so that Spark's optimizer can drop the fields a query does not read), the
first call on a batch decodes it and the others take their field from that result.

The key is the identity of the argument arrays (type, offset, length, buffer
addresses): the calls on one batch get the very same buffers. The last arguments are
held next to the result, so their memory cannot be reused by a later batch while their
addresses are the key.
"""

from __future__ import annotations

__all__ = ["once_per_batch"]

#: (key, the argument arrays held, result) of the last batch computed in this worker
_LAST = [None, None, None]


def _identity_of(arr) -> tuple | None:
    if arr is None:
        return None
    return (arr.type.id, arr.offset, len(arr), *(b.address if b is not None else 0 for b in arr.buffers()))


def once_per_batch(params, arrays: tuple, compute):
    """``compute()`` once for these argument ``arrays`` and decoder ``params`` (hashable);
    the same result for every later call with the same arrays and params."""
    key = (params, *(_identity_of(a) for a in arrays))
    if _LAST[0] == key:
        return _LAST[2]
    out = compute()
    _LAST[:] = [key, arrays, out]
    return out
