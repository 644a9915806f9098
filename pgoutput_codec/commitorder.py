"""Commit order: servers send transactions in commit order, so commit LSNs rise; a commit
that does not is a replay of one before it, or an archive read out of order. One rule for
pgoutput and openGauss."""

from __future__ import annotations

import bisect

from .errors import ArchiveOrderError
from .pgoutput.messages import format_lsn

__all__ = ["TAKE", "REPLAY", "OUT_OF_ORDER", "judge_commit", "order_error"]

TAKE, REPLAY, OUT_OF_ORDER = "take", "replay", "out of order"


def judge_commit(taken, lsn: int) -> str:
    """The ``replays="drop"`` rule for a commit at ``lsn``, one place for pgoutput and
    openGauss: servers send transactions in commit order, so commit LSNs rise. ``taken``:
    the commit LSNs taken before, rising (appended to when this one is taken). TAKE: above
    every one; REPLAY: equal to one (a consumer that reconnected before confirming what
    it had archived receives it again); else OUT_OF_ORDER (:func:`order_error`)."""
    if not taken or lsn > taken[-1]:
        taken.append(lsn)
        return TAKE
    i = bisect.bisect_left(taken, lsn)
    return REPLAY if i < len(taken) and taken[i] == lsn else OUT_OF_ORDER


def order_error(message_type: str, lsn: int, previous: int, key=None, floor=False,
                remembered=None) -> ArchiveOrderError:
    """The error for a commit :func:`judge_commit` finds OUT_OF_ORDER (``key``: its order
    key); ``floor``: in a resumed run, a new commit at or below the checkpoint's
    ``after_lsn`` (``previous``) and none of the commit LSNs it ``remembered`` (None:
    a checkpoint that names none)."""
    where = "" if key is None else f"seq {key}: "
    if floor:
        if not remembered:
            known = "which the checkpoint does not name (it names no commit LSN but after_lsn)"
        else:
            known = (f"and the checkpoint remembers {len(remembered)} commit LSN(s), "
                     f"{format_lsn(remembered[0])} to {format_lsn(remembered[-1])}: not this one")
        return ArchiveOrderError(
            f"{where}'{message_type}' commit at LSN {format_lsn(lsn)}, at or below the checkpoint's after_lsn "
            f"{format_lsn(previous)}, arrived after the rows the run before read, {known}: the archive is not "
            "in arrival order (or it replays a commit older than those, or it spans a timeline switch) — "
            "its rows are not given: decode the archive from its start, without the checkpoint",
            message_type=message_type, seq=key, commit_lsn=lsn, previous_lsn=previous)
    return ArchiveOrderError(
        f"{where}'{message_type}' commit at LSN {format_lsn(lsn)} after a commit at {format_lsn(previous)}, "
        "and no commit before it had this LSN (not a replay): the archive is not in arrival order (files "
        "listed out of order? give order_by=, the archive's arrival-order column) — or it spans a "
        "timeline switch, whose LSNs restart lower: replays='keep' gives every commit as it comes",
        message_type=message_type, seq=key, commit_lsn=lsn, previous_lsn=previous)
