"""Where the next incremental run over a growing archive starts: :class:`Checkpoint`.

The commit window (``after_lsn``) stops an incremental run from giving a transaction
twice, but the run still reads the archive from its first row: a Relation sent years
ago names today's rows, and a transaction still open at the end of the last run began
before it. A checkpoint carries exactly what the archive before a point would have
told the run, so the next run reads only the rows from that point on:

- ``after_lsn``: the largest commit LSN the run gave (commit LSNs rise in arrival
  order); the next run gives only transactions committed after it;
- ``from_key``: the order key of the first control row (Begin, Begin Prepare, the first
  Stream Start) of the earliest transaction the run did not give — still open at its
  end (a big transaction being streamed, one prepared and not yet committed) or
  committed after its ``until_lsn``. Rows from there on are read again next time:
  a checkpoint holds no rows, so it stays small (JSON, a few KB and the
  ``commit_lsns`` below, 150 KB at most) whatever is open;
- the Relation and Type definitions in force at ``from_key`` (pgoutput sends a
  Relation once per walsender session, not once per transaction), the Relations in the
  order they were sent (which of two relations that bore one name bears it now:
  ``ControlPlan.bearer``), and the stream state there;
- ``end_key``: the order key just past the last control row the run read. Rows from
  ``from_key`` up to it are read again; a commit at or below ``after_lsn`` among them
  was the run's to give, one past it is new — a replay of a commit given before (at
  ``after_lsn``: dropped as such) or an archive out of order (``ArchiveOrderError``),
  never left out in silence;
- ``commit_lsns``: the commit LSNs at or below ``after_lsn`` the runs took, rising,
  the most recent :data:`REMEMBERED_COMMITS` of them: a reconnect resends the
  transactions after the slot's ``confirmed_flush``, so a resumed run judges a commit
  at or below ``after_lsn`` past ``end_key`` as one run over the whole archive would —
  one of them again is a replay, any other an archive out of order. A checkpoint
  without it (null) knows the commit at ``after_lsn`` only;
- ``rank_base``: where the next run's ``commit_rank`` starts, past every rank this run
  gave, so that the change rows of runs appended to one table keep (``commit_rank``,
  ``seq``) their commit order (were each run's ranks to start at 0, a table rebuilt
  from such a lake would take an earlier run's row image for the newest).

``held_by`` lists the transactions that keep ``from_key`` where it is (xid, kind, gid,
their first key): a prepared transaction nobody commits makes every later run read
the archive from its Begin Prepare onwards, and this is where to see it.

The order key must keep rising across runs (``capture``'s ``seq``): file positions
(``order_by=None`` in Spark) restart with every listing, so they cannot say where a
run left off. Built by :meth:`pgoutput_codec.changes.ControlPlan.checkpoint`; taken by
``ControlPlan.build(resume=)`` and Spark's ``decode_changes(resume=)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields

__all__ = ["Checkpoint", "latest_types", "recent_commits", "BEFORE_ALL", "REMEMBERED_COMMITS"]

_FORMAT = 1

#: An order key below every other: a checkpoint's Relations are in force before any row,
#: and a checkpoint from here holds nothing (the archive's start).
BEFORE_ALL = -(2 ** 63)

#: How many commit LSNs a checkpoint remembers (``commit_lsns``): a replay resends the
#: commits after the slot's confirmed_flush, which a consumer confirms every few
#: seconds — far fewer commits than these, which add 150 KB at most to the JSON.
REMEMBERED_COMMITS = 10_000


@dataclass(frozen=True)
class Checkpoint:
    from_key: int
    after_lsn: int | None = None
    in_stream: bool = False
    relations: tuple = ()      # Relation definitions (dicts as the decoder keeps them), one per relid, in the order sent
    types: tuple = ()          # (type_oid, namespace, type_name) of the Type messages, in order
    rank_base: int = 0         # the next run's first commit_rank
    end_key: int | None = None   # past the last control row read (None: a checkpoint without it)
    commit_lsns: tuple | None = None   # recent commit LSNs <= after_lsn, rising (None: a checkpoint without them)
    held_by: tuple = field(default=(), compare=False)   # diagnostics only

    def __post_init__(self):
        # each transaction that uses a type resends its Type message: one entry per
        # type OID (the newest name), so a checkpoint does not grow with the archive
        object.__setattr__(self, "types", latest_types(self.types))

    def to_json(self) -> str:
        # the fields as they are (JSON writes a tuple as a list): what ``asdict`` gives,
        # without its deep copy of every Relation, which costs more than the JSON
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["format"] = _FORMAT
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Checkpoint":
        try:
            d = json.loads(text)
        except ValueError as e:
            raise ValueError(f"not a checkpoint: not JSON ({e})") from None
        return cls.of(d)

    @classmethod
    def of(cls, value) -> "Checkpoint":
        """A Checkpoint from itself, its ``to_json`` text or that text's dict."""
        if isinstance(value, Checkpoint):
            return value
        if isinstance(value, (str, bytes)):
            return cls.from_json(value)
        if not isinstance(value, dict):
            raise TypeError(f"resume must be a Checkpoint, its JSON text or dict, not {type(value).__name__}")
        d = dict(value)
        fmt = d.pop("format", _FORMAT)
        if fmt != _FORMAT:
            raise ValueError(f"checkpoint format {fmt} is not {_FORMAT}: written by another version")
        try:
            if "from_key" not in d:
                raise KeyError("from_key")
            return cls(from_key=_int(d, "from_key", *_INT64),
                       after_lsn=_int(d, "after_lsn", *_UINT64, null=True),
                       in_stream=_bool(d, "in_stream"),
                       relations=tuple(_relation(r) for r in _list(d, "relations")),
                       types=tuple(_type(t) for t in _list(d, "types")),
                       rank_base=_int(d, "rank_base", 0, _INT64[1], default=0),
                       end_key=_int(d, "end_key", *_INT64, null=True),
                       commit_lsns=_commit_lsns(d),
                       held_by=tuple(_list(d, "held_by")))
        except KeyError as e:
            raise ValueError(f"not a checkpoint: no {e.args[0]!r}") from None
        except (TypeError, ValueError) as e:
            raise ValueError(f"not a checkpoint: {e}") from None


def recent_commits(*lsns) -> tuple:
    """The commit LSNs of ``lsns`` (iterables of ints) a checkpoint remembers: each once,
    rising, the last :data:`REMEMBERED_COMMITS`."""
    return tuple(sorted(set().union(*lsns))[-REMEMBERED_COMMITS:])


def latest_types(types) -> tuple:
    """(type_oid, namespace, type_name) entries, one per OID: the last one given, in the
    order each OID was first given."""
    latest = {}
    for t in types:
        latest[t[0]] = tuple(t)
    return tuple(latest.values())


# A checkpoint may have been stored for months, or edited: its definitions are checked
# here, so that a bad one fails with a clear error before any row is decoded.

_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_UINT64 = (0, 2 ** 64 - 1)
_UINT32 = (0, 2 ** 32 - 1)
_INT32 = (-(2 ** 31), 2 ** 31 - 1)


def _int(d: dict, name: str, lo: int, hi: int, *, null=False, default=None, where=""):
    """``d[name]``: an integer (JSON number without a fraction, not a boolean) in
    ``[lo, hi]``, the range the decoders hold it in; None when ``null`` and it is null
    or absent."""
    if name not in d and not null and default is None:
        raise KeyError(name)
    v = d.get(name, default)
    if v is None and (null or default is not None):
        return default
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ValueError(f"{where}{name} must be an integer from {lo} to {hi}, got {v!r:.40}")
    return v


def _bool(d: dict, name: str) -> bool:
    v = d.get(name, False)
    if not isinstance(v, bool):
        raise ValueError(f"{name} must be true or false, got {v!r:.40}")
    return v


def _list(d: dict, name: str, where="") -> list:
    v = d.get(name, [])
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"{where}{name} must be a list, got {v!r:.40}")
    return v


def _str(d: dict, name: str, where="", null=False):
    v = d.get(name)
    if v is None and null:
        return None
    if not isinstance(v, str):
        raise KeyError(name) if name not in d else ValueError(f"{where}{name} must be text, got {v!r:.40}")
    return v


def _commit_lsns(d: dict):
    v = d.get("commit_lsns")
    if v is None:
        return None
    lsns = [_int({"commit_lsns": x}, "commit_lsns", *_UINT64, where="each of ") for x in _list(d, "commit_lsns")]
    if len(lsns) > REMEMBERED_COMMITS:
        raise ValueError(f"commit_lsns must hold at most {REMEMBERED_COMMITS} LSNs, got {len(lsns)}")
    if any(b <= a for a, b in zip(lsns, lsns[1:], strict=False)):
        raise ValueError("commit_lsns must rise")
    after = d.get("after_lsn")
    if lsns and (after is None or lsns[-1] > after):
        raise ValueError(f"commit_lsns must not pass after_lsn ({after}), got {lsns[-1]}")
    return tuple(lsns)


def _relation(r) -> dict:
    if not isinstance(r, dict) or not isinstance(r.get("columns"), list):
        raise ValueError(f"a relation must be a dict with a columns list, got {r!r:.80}")
    rid = _int(r, "relation_id", *_UINT32, where="relations: ")
    at = f"relation {rid}: "
    cols = []
    for c in r["columns"]:
        if not isinstance(c, dict):
            raise ValueError(f"{at}a column must be a dict, got {c!r:.80}")
        cols.append(dict(name=_str(c, "name", at), type_oid=_int(c, "type_oid", *_UINT32, where=at),
                         type_modifier=_int(c, "type_modifier", *_INT32, where=at),
                         flags=_int(c, "flags", 0, 255, where=at),
                         **{k: _str(c, k, at) for k in ("type_namespace", "type_name") if c.get(k) is not None}))
    return dict(schema=_str(r, "schema", at), table=_str(r, "table", at), relation_id=rid,
                replica_identity=_str(r, "replica_identity", at), columns=cols)


def _type(t) -> tuple:
    if not isinstance(t, (list, tuple)) or len(t) != 3:
        raise ValueError(f"types: an entry must be [type_oid, namespace, type_name], got {t!r:.80}")
    oid, ns, name = t
    d = dict(type_oid=oid, namespace=ns, type_name=name)
    return _int(d, "type_oid", *_UINT32, where="types: "), _str(d, "namespace", "types: "), \
        _str(d, "type_name", "types: ")
