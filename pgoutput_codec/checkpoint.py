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
  a checkpoint holds no rows, so it stays small (JSON, a few KB) whatever is open;
- the Relation and Type definitions in force at ``from_key`` (pgoutput sends a
  Relation once per walsender session, not once per transaction), the Relations in the
  order they were sent (which of two relations that bore one name bears it now:
  ``ControlPlan.bearer``), and the stream state there;
- ``end_key``: the order key just past the last control row the run read. Rows from
  ``from_key`` up to it are read again; a commit at or below ``after_lsn`` among them
  was the run's to give, one past it is new — a replay of a commit given before (at
  ``after_lsn``: dropped as such) or an archive out of order (``ArchiveOrderError``),
  never left out in silence;
- ``rank_base``: where the next run's ``commit_rank`` starts, past every rank this run
  gave, so that the change rows of runs appended to one table keep (``commit_rank``,
  ``seq``) their commit order (were each run's ranks to start at 0, a table rebuilt
  from such a lake would take an earlier run's row image for the newest).

``held_by`` lists the transactions that keep ``from_key`` where it is (xid, kind, gid,
their first key): a prepared transaction nobody commits makes every later run read
the archive from its Begin Prepare onwards, and this is where to see it.

The order key must keep rising across runs (``capture``'s ``seq``): file positions
(``order_by=None`` in Spark) restart with every listing, so they cannot say where a
run left off. Built by :meth:`pgoutput_codec.plan.ControlPlan.checkpoint`; taken by
``ControlPlan.build(resume=)`` and Spark's ``decode_changes(resume=)``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

__all__ = ["Checkpoint", "latest_types", "BEFORE_ALL"]

_FORMAT = 1

#: An order key below every other: a checkpoint's Relations are in force before any row,
#: and a checkpoint from here holds nothing (the archive's start).
BEFORE_ALL = -(2 ** 63)


@dataclass(frozen=True)
class Checkpoint:
    from_key: int
    after_lsn: int | None = None
    in_stream: bool = False
    relations: tuple = ()      # Relation definitions (dicts as the decoder keeps them), one per relid, in the order sent
    types: tuple = ()          # (type_oid, namespace, type_name) of the Type messages, in order
    rank_base: int = 0         # the next run's first commit_rank
    end_key: int | None = None   # past the last control row read (None: a checkpoint without it)
    held_by: tuple = field(default=(), compare=False)   # diagnostics only

    def __post_init__(self):
        # each transaction that uses a type resends its Type message: one entry per
        # type OID (the newest name), so a checkpoint does not grow with the archive
        object.__setattr__(self, "types", latest_types(self.types))

    def to_json(self) -> str:
        d = asdict(self)
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
            return cls(from_key=int(d["from_key"]),
                       after_lsn=None if d.get("after_lsn") is None else int(d["after_lsn"]),
                       in_stream=bool(d.get("in_stream", False)),
                       relations=tuple(_relation(r) for r in d.get("relations", ())),
                       types=tuple(_type(t) for t in d.get("types", ())),
                       rank_base=int(d.get("rank_base", 0)),
                       end_key=None if d.get("end_key") is None else int(d["end_key"]),
                       held_by=tuple(d.get("held_by", ())))
        except KeyError as e:
            raise ValueError(f"not a checkpoint: no {e.args[0]!r}") from None
        except (TypeError, ValueError) as e:
            raise ValueError(f"not a checkpoint: {e}") from None


def latest_types(types) -> tuple:
    """(type_oid, namespace, type_name) entries, one per OID: the last one given, in the
    order each OID was first given."""
    latest = {}
    for t in types:
        latest[t[0]] = tuple(t)
    return tuple(latest.values())


# A checkpoint may have been stored for months, or edited: its definitions are checked
# here, so that a bad one fails with a clear error before any row is decoded.

def _relation(r) -> dict:
    if not isinstance(r, dict) or not isinstance(r.get("columns"), list):
        raise ValueError(f"a relation must be a dict with a columns list, got {r!r:.80}")
    cols = [dict(name=str(c["name"]), type_oid=int(c["type_oid"]), type_modifier=int(c["type_modifier"]),
                 flags=int(c["flags"]), **{k: str(c[k]) for k in ("type_namespace", "type_name") if c.get(k) is not None})
            for c in r["columns"]]
    return dict(schema=str(r["schema"]), table=str(r["table"]), relation_id=int(r["relation_id"]),
                replica_identity=r["replica_identity"], columns=cols)


def _type(t) -> tuple:
    oid, ns, name = t
    return int(oid), ns, name
