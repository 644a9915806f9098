"""The control plan: the transaction walk over an archive's control rows done once, then
change rows decoded from any subset of the rows, in any order (see the package)."""

from __future__ import annotations

import copy
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..pgoutput._batch import initial_stream_state
from .._native.gather import take_table
from ..arrays import lsn_array, one_binary, order_keys
from ..pgoutput.batch import decode_batch_rows, decode_batch_with_state, envelope_code
from .rows import (COPY_XID, OUTSIDE_TRANSACTION, change_columns, commit_order, corrupt_rows, tag_codes,
                   truncate_columns, versions_before, with_commits)
from .decoder import ChangeDecoder
from .checkpoint import Checkpoint, recent_commits
from ..errors import PgoutputDecodeError
from ..pgoutput.messages import format_lsn
from .relations import one_bearer
from ..schema import CHANGE_SCHEMA
from ..threads import run_pieces
from ..selection import commit_window, in_commit_window, intersect_windows, table_selected
from . import chunks
from .filters import RowFilters
from .tags import BEFORE_ALL, IS_CHANGE, IS_CONTROL, control_candidates

__all__ = ["ControlPlan", "checkpoint_after", "decode_changes_parallel", "changes_of_pieces", "spread_rows"]


def _glob_exact(name: str) -> str:
    """A glob (``fnmatch``) matching ``name`` only."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def spread_rows(table: pa.Table, at: np.ndarray, n: int) -> pa.Table:
    """``n`` rows: ``table``'s rows at positions ``at`` (in order), null rows elsewhere."""
    pick = np.full(n, -1, dtype=np.int64)
    pick[at] = np.arange(len(table))
    return table.take(pa.array(pick, mask=pick < 0))


def _relation_copy(rel: dict) -> dict:
    """A Relation version (scalars, and a list of column dicts of scalars) copied whole:
    ``copy.deepcopy``'s result, at a tenth of its cost per Relation of a checkpoint."""
    cols = rel["columns"]
    return {**rel, "columns": cols if cols is None else type(cols)(dict(c) for c in cols)}


def _row_name(key, lsn: pa.Array, i: int) -> str:
    """How errors name an archive row: its order key, and its lsn when the archive has one."""
    v = lsn[i].as_py()
    return f"archive row seq {key}" + (f" (lsn {format_lsn(v)})" if v is not None else "")


class ControlPlan(RowFilters):
    """Everything needed to decode change rows in parallel; picklable (broadcast it).

    Options are those of :class:`ChangeDecoder` (``tables``, ``include_*``, ``errors``,
    ``registry``); ``skip_empty_xacts=False`` is not supported here (no marker rows).
    """

    @classmethod
    def build(cls, payloads, order, *, envelope: str = "auto", in_stream=None, lsn=None, resume=None,
              **options) -> "ControlPlan":
        """``lsn``: the rows' archive lsn, to name a malformed row by it too. ``resume``:
        a :class:`~pgoutput_codec.changes.checkpoint.Checkpoint` (or its JSON) of the run
        before; the rows given must then be those with order key >= its ``from_key``."""
        keys = order_keys(order)
        cp = None if resume is None else Checkpoint.of(resume)
        if cp is not None:
            if len(keys) and keys.min() < cp.from_key:
                raise ValueError(f"order key {int(keys.min())} is before the checkpoint's from_key {cp.from_key}: "
                                 "resume over the archive's rows with order key >= from_key")
            in_stream = cp.in_stream
        values = one_binary(payloads)
        srt = np.argsort(keys, kind="stable")
        keys = keys[srt]
        if len(keys) > 1 and (np.diff(keys) == 0).any():
            raise ValueError("order keys of control rows are not unique")
        values = values.take(pa.array(srt, pa.int64()))
        env = envelope_code(envelope)
        if in_stream is None:
            in_stream = bool(initial_stream_state(values, env, True))
        options.setdefault("errors", "raise")
        dec = ChangeDecoder(resume=cp, **options)
        self = cls()
        self.start_key = None if cp is None else cp.from_key
        self.start_end_key = None if cp is None else cp.end_key
        self.start_commit_lsns = () if cp is None else cp.commit_lsns or ()
        self.start_after = None if cp is None else cp.after_lsn
        # commit ranks given out start here (a run resumed: past the runs before)
        self.rank_base = 0 if cp is None else cp.rank_base
        walk = dec.walk
        seeded = walk.seeded
        self.options = dict(options)
        self.envelope = envelope
        msgs, _ = decode_batch_with_state(values, envelope=envelope, in_stream=bool(in_stream),
                                          workers=options.get("workers"))
        err = msgs.field("error")
        self.errors = []
        ok = err.is_null().to_numpy(zero_copy_only=False)
        if not ok.all():
            bad = np.flatnonzero(~ok)
            self.errors = [dict(seq=int(keys[i]), error=err[int(i)].as_py()) for i in bad]
            if options["errors"] == "raise":
                i = int(srt[bad[0]])
                raise PgoutputDecodeError(f"{_row_name(keys[bad[0]], lsn_array(lsn, len(values)), i)}: "
                                          f"{self.errors[0]['error']}")
        tags = tag_codes(msgs.field("type"))
        keep = ok & IS_CONTROL[tags]
        ctrl_idx = np.flatnonzero(keep)
        self.ctrl_keys = keys[ctrl_idx]
        walk.in_stream = bool(in_stream)
        n_ctrl = len(ctrl_idx)
        self.seg_slot = np.empty(n_ctrl + 1, np.int64)
        self.seg_stream = np.empty(n_ctrl + 1, bool)
        walked = []
        # The walk, in chunks of control rows: the row dicts it reads and the transactions
        # it committed are let go after each chunk, so what stays is a few values per
        # commit, not Python objects per transaction (400 000 one-row transactions: 148
        # MiB, against 596 MiB holding them all). It makes a few objects per control row
        # and no reference cycles; Python's cyclic collector, set off by those
        # allocations, would rescan everything alive and take half the time (6.2 s with
        # it, 3.2 s without). A run of plain transactions (Begin … Commit, Relations, Types) is
        # walked with array operations instead (see chunks.plain_walk, chunks.walk_bounds).
        with chunks.cyclic_gc_paused():
            for a, b, array in chunks.walk_bounds(tags[ctrl_idx]):
                # rows before the first control row: changes whose Begin precedes the archive —
                # except in a run resumed from a checkpoint, which starts at a Begin (or after the end)
                phantom = a == 0 and (cp is None or cp.from_key == BEFORE_ALL)
                w = (chunks.plain_walk(walk, msgs, tags, ctrl_idx[a:b], phantom) if array else None) \
                    or chunks.python_walk(walk, msgs, ctrl_idx[a:b], phantom, self.ctrl_keys[a:b])
                end = b + 1 if b == n_ctrl else b     # segment b is the next chunk's first
                self.seg_slot[a:end] = w.seg_slot[:end - a]
                self.seg_stream[a:end] = w.seg_stream[:end - a]
                w.r_keys = self.ctrl_keys[a:b][w.r_keys]
                w.y_keys = self.ctrl_keys[a:b][w.y_keys]
                walked.append(w)
        self.replayed = dec.replayed   # transactions received again and dropped (see ChangeDecoder)
        # transactions that committed, in commit order
        self.commit_slots = np.concatenate([w.slots for w in walked])
        self.commit_xid = pa.concat_arrays([w.xid for w in walked])
        self.commit_lsn = pa.concat_arrays([w.lsn for w in walked])
        self.commit_ts = pa.concat_arrays([w.ts for w in walked]).cast(CHANGE_SCHEMA.field("commit_ts").type)
        self.commit_origin = pa.concat_arrays([w.origin for w in walked])
        self.commit_ranks = None   # a plan for_keys: the whole plan's rank of each commit kept
        self.key_range = None
        self.aborted, done = {}, 0
        for w in walked:
            self.aborted.update((done + j, v) for j, v in w.aborted.items())
            done += len(w.slots)
        self._window(dec.window)
        # what is left open (committed transactions were let go above)
        self.open_transactions = [dict(slot=s, xid=t.xid, kind=t.kind, gid=t.gid) for s, t in walk.txns.items()]
        # the open ones that can still commit: the transaction in progress, streamed ones,
        # prepared ones (a Begin after rows whose Begin preceded the archive leaves those behind)
        self.live_slots = {s for s in [walk.ctx, *walk.streams.values(), *walk.prepared.values()] if s >= 0}
        # relation events: (relid, key) -> version, sorted by relid then key
        # (a checkpoint's definitions: events before every key)
        ev_rel = np.concatenate([np.array([rid for rid, _ in seeded], np.int64), *[w.r_rel for w in walked]])
        ev_key = np.concatenate([np.full(len(seeded), BEFORE_ALL, np.int64), *[w.r_keys for w in walked]])
        ev_ver = np.concatenate([np.array([v for _, v in seeded], np.int64), *[w.r_versions for w in walked]])
        o = np.lexsort((ev_key, ev_rel))
        self.ev_rel, self.ev_key, self.ev_ver = ev_rel[o], ev_key[o], ev_ver[o]
        self.versions = walk.versions
        self.version_table = walk.version_table()
        self.widths = walk.widths()
        self.type_events = [(BEFORE_ALL, t) for t in (cp.types if cp is not None else ())] + [
            (int(k), t) for w in walked for k, t in zip(w.y_keys.tolist(), w.y_types, strict=True)]
        self.patterns = dec.patterns
        self.output_schema = pa.schema(list(dec.output_schema) + [pa.field("commit_rank", pa.int64())])
        self.registry = options.get("registry")
        return self

    def _window(self, window):
        """Give only the transactions whose commit LSN lies in ``window`` (see
        :func:`~pgoutput_codec.selection.commit_window`; None: all). Ranks stay those of
        the whole archive."""
        self.window = window
        self.in_window = None if window is None else in_commit_window(self.commit_lsn, window)

    def between(self, after_lsn=None, until_lsn=None) -> "ControlPlan":
        """This plan giving only the transactions committed in ``(after_lsn,
        until_lsn]`` as well (the window narrowed, never widened)."""
        other = copy.copy(self)
        other._window(intersect_windows(self.window, commit_window(after_lsn, until_lsn)))
        return other

    def checkpoint(self) -> Checkpoint:
        """Where the next run resumes (:mod:`pgoutput_codec.changes.checkpoint`): after the
        largest commit LSN this plan gives, from the first key of the earliest
        transaction it does not give (still open, or committed after the window)."""
        if self.key_range is not None:
            raise ValueError("a plan for_keys has no checkpoint: ask the whole plan")
        lsn = pc.fill_null(self.commit_lsn, 0).to_numpy(zero_copy_only=False).astype(np.uint64)
        given = lsn if self.in_window is None else lsn[self.in_window]
        after = self.window[0] if self.window is not None else None
        if len(given):
            after = int(given.max()) if after is None else max(after, int(given.max()))
        if self.start_after is not None:     # (replays="keep" gives commits below it)
            after = self.start_after if after is None else max(after, self.start_after)
        # committed after the window (none given, no lower bound: every commit is later)
        later = np.flatnonzero(lsn > np.uint64(after)) if after is not None else np.arange(len(lsn))
        held = [dict(t) for t in self.open_transactions if t["slot"] in self.live_slots] + [
            dict(slot=int(self.commit_slots[k]), xid=self.commit_xid[int(k)].as_py(), kind="committed later", gid=None)
            for k in later]
        for t in held:
            t["from_key"] = self._first_key(t.pop("slot"))
        if held:
            from_key = min(t["from_key"] for t in held)
        elif len(self.ctrl_keys):
            from_key = int(self.ctrl_keys[-1]) + 1
        else:
            from_key = self.start_key if self.start_key is not None else BEFORE_ALL
        rels = {}
        for rid, key, ver in zip(self.ev_rel.tolist(), self.ev_key.tolist(), self.ev_ver.tolist(), strict=True):
            if key < from_key:
                rels[rid] = (key, ver)   # sorted by relid then key: the last one wins
        # in the order they were sent (which relation bears a name: ControlPlan.bearer)
        rels = {rid: ver for rid, (_, ver) in sorted(rels.items(), key=lambda kv: kv[1])}
        # past every control row read (the run before's end, when this one read none)
        end_key = int(self.ctrl_keys[-1]) + 1 if len(self.ctrl_keys) else self.start_end_key
        # the commits a replay may send again (those above after_lsn are read again)
        taken = lsn[pc.is_valid(self.commit_lsn).to_numpy(zero_copy_only=False)]
        taken = taken[taken <= np.uint64(after)] if after is not None else taken[:0]
        return Checkpoint(
            from_key=int(from_key), after_lsn=after, end_key=end_key,
            commit_lsns=recent_commits(self.start_commit_lsns, taken.tolist()),
            in_stream=bool(self.seg_stream[np.searchsorted(self.ctrl_keys, from_key, side="left")]),
            relations=tuple(_relation_copy(self.versions[v]) for v in rels.values()),
            types=tuple(t for k, t in self.type_events if k < from_key),
            rank_base=self.rank_base + len(self.commit_slots),
            held_by=tuple(held))

    def _first_key(self, slot: int) -> int:
        """The order key of the control row that opened transaction ``slot`` (rows before
        the first control row: the run's first possible key)."""
        seg = int(np.flatnonzero(self.seg_slot == slot)[0])
        if seg > 0:
            return int(self.ctrl_keys[seg - 1])
        return self.start_key if self.start_key is not None else BEFORE_ALL

    def __getstate__(self):
        d = dict(self.__dict__)
        d["options"] = {k: v for k, v in d["options"].items() if k != "registry"}
        d["registry"] = None
        return d

    # ------------------------------------------------------------------ executors
    def in_stream_at(self, order) -> np.ndarray:
        """The stream state in force at each order key."""
        return self.seg_stream[np.searchsorted(self.ctrl_keys, order_keys(order), side="left")]

    def _versions_at(self, relids: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Version of the newest Relation with that relid sent before each key (-1: none)."""
        return versions_before(self.ev_rel, self.ev_key, self.ev_ver, relids, keys)

    def changes(self, values, order, lsn=None, *, errors: str | None = None) -> pa.Table:
        """Committed change rows among these rows (any subset of the archive, any order),
        with ``commit_rank``. ``errors``: "raise" or "collect" (default: the plan's)."""
        errors = errors or self.options.get("errors", "raise")
        keys = order_keys(order)
        values = one_binary(values)
        n = len(values)
        seg = np.searchsorted(self.ctrl_keys, keys, side="left")
        msgs = decode_batch_rows(values, self.seg_stream[seg], envelope=self.envelope)
        lsn_arr = lsn_array(lsn, n)
        self.last_counts = counts = {"rows_in": n, "rows_in_error": 0, "orphans": 0}
        self.last_errors = []
        err = msgs.field("error")
        if err.null_count != n:
            bad = np.flatnonzero(err.is_valid().to_numpy(zero_copy_only=False))
            counts["rows_in_error"] = len(bad)
            if errors == "raise":
                i = int(bad[0])
                raise PgoutputDecodeError(f"{_row_name(keys[i], lsn_arr, i)}: {err[i].as_py()}")
            self.last_errors = [dict(seq=int(keys[i]), error=err[int(i)].as_py()) for i in bad]
        counts["rows_decoded"] = n - counts["rows_in_error"]
        tags = tag_codes(msgs.field("type"))
        idx = np.flatnonzero(IS_CHANGE[tags])
        slot = self.seg_slot[seg[idx]]
        orphan = slot < 0
        if orphan.any():   # a change outside any transaction: reported, not guessed
            counts["orphans"] = int(orphan.sum())
            if errors == "raise":
                i = int(idx[orphan][0])
                raise PgoutputDecodeError(f"{_row_name(keys[i], lsn_arr, i)}: {OUTSIDE_TRANSACTION}")
            self._collect(counts, [(int(i), OUTSIDE_TRANSACTION) for i in idx[orphan]], keys)
        rank = self._rank(slot, lambda: pc.fill_null(msgs.field("xid").take(pa.array(idx, pa.int64())), 0)
                          .to_numpy(zero_copy_only=False).astype(np.int64))
        live = rank >= 0
        idx, rank = idx[live], rank[live]
        is_t = tags[idx] == ord("T")
        iud, iud_rank = idx[~is_t], rank[~is_t]
        relids = pc.fill_null(msgs.field("relation_id"), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        ver = self._versions_at(relids[iud], keys[iud])
        bad, wrong = corrupt_rows(msgs, iud, ver, self.widths)
        if wrong:                 # corrupt rows: errors, not changes
            if errors == "raise":
                i, text = wrong[0]
                raise PgoutputDecodeError(f"{_row_name(keys[i], lsn_arr, i)}: {text}")
            self._collect(counts, wrong, keys)
            iud, iud_rank, ver = iud[~bad], iud_rank[~bad], ver[~bad]
        table = self._rows(msgs, iud, iud_rank, ver, keys, lsn_arr)
        if is_t.any():
            table = pa.concat_tables([table, self._truncates(msgs, idx[is_t], rank[is_t], keys, lsn_arr)])
        chosen = getattr(self, "_chosen", None)
        if chosen is not None and len(table):
            table = table.filter(pc.equal(table.column("relation_id"), pa.scalar(chosen[1], pa.uint32()))
                                 if chosen[1] is not None else pa.array(np.zeros(len(table), bool)))
        elif self.patterns is not None and len(table):
            key = pc.binary_join_element_wise(pc.fill_null(table.column("schema"), ""),
                                              pc.fill_null(table.column("table"), ""), "\x00")
            chosen = [k for k in pc.unique(key).to_pylist() if table_selected(self.patterns, *k.split("\x00", 1))]
            table = table.filter(pc.is_in(key, value_set=pa.array(chosen, pa.string())))
        return table.select(self.output_schema.names).cast(self.output_schema)

    def _collect(self, counts: dict, wrong: list, keys: np.ndarray) -> None:
        """Rows that decoded but cannot be placed, ``wrong`` (row, text): in error."""
        counts["rows_in_error"] += len(wrong)
        counts["rows_decoded"] -= len(wrong)
        self.last_errors += [dict(seq=int(keys[i]), error=text) for i, text in wrong]

    def _commit_positions(self, slot: np.ndarray) -> np.ndarray:
        """Each transaction ``slot``'s position in commit order (-1: it did not commit)."""
        rank = np.full(len(slot), -1, dtype=np.int64)
        if len(self.commit_slots) and len(slot):
            o = np.argsort(self.commit_slots)
            pos = np.minimum(np.searchsorted(self.commit_slots[o], slot), len(o) - 1)
            hit = (self.commit_slots[o][pos] == slot) & (slot >= 0)   # -1: no transaction
            rank[hit] = o[pos[hit]]
        return rank

    def _rank(self, slot: np.ndarray, xid_of) -> np.ndarray:
        """Commit rank of the transaction of each change (its segment's ``slot``); -1
        where it did not commit (rolled back, aborted, still open, or no transaction),
        committed outside the plan's commit-LSN window, or the change's subtransaction
        aborted. ``xid_of()``: the changes' message xids (0
        outside stream blocks), asked for only when a subtransaction aborted."""
        rank = self._commit_positions(slot)
        given = rank >= 0
        if self.in_window is not None and given.any():   # committed outside the commit-LSN window
            rank[given & ~self.in_window[np.maximum(rank, 0)]] = -1
        if self.aborted and len(slot):
            msg_xid = xid_of()
            for k, subxids in self.aborted.items():
                rank[(rank == k) & np.isin(msg_xid, subxids)] = -1
        if self.commit_ranks is not None:   # positions here -> the whole plan's ranks
            given = rank >= 0
            rank[given] = self.commit_ranks[rank[given]]
        return rank

    def _version_selected(self) -> np.ndarray | None:
        """Per Relation version: does ``tables`` select its table (None: no ``tables``);
        for a plan :meth:`for_table`, is it a version of the relation chosen."""
        chosen = getattr(self, "_chosen", None)
        if chosen is not None:
            return chosen[0]
        if self.patterns is None:
            return None
        if getattr(self, "_vsel_len", -1) != len(self.versions):
            self._vsel = np.array([table_selected(self.patterns, v["schema"], v["table"]) for v in self.versions],
                                  dtype=bool)
            self._vsel_len = len(self.versions)
        return self._vsel

    def columns_by_version(self) -> dict:
        """{``relation_version`` fingerprint: that Relation's column list (dicts)}."""
        vt = self.version_table
        return dict(zip(vt.column("relation_version").to_pylist(), vt.column("columns").to_pylist(), strict=True))

    def for_table(self, schema: str, table: str, until_lsn=None) -> "ControlPlan":
        """This plan narrowed to the table named ``schema.table`` (exact names): the
        changes of the relation that bears the name (:meth:`bearer`; as of ``until_lsn``
        when given), under whatever name each was sent — none if the plan's ``tables``
        leaves them out."""
        other = copy.copy(self)
        holder, replaced = self.bearer(schema, table, until_lsn)
        sel = np.array([v["relation_id"] == holder for v in self.versions], dtype=bool)
        base = self._version_selected()
        other._chosen = (sel if base is None else sel & base, holder, replaced)
        return other

    def bearer(self, schema: str, table: str, until_lsn=None) -> tuple:
        """(the relation id of the table named ``schema.table``, or None; whether
        another relation bore the name while these changes ran): the rule of
        :func:`pgoutput_codec.changes.relations.bearer`, on the Relation messages of the
        transactions that committed (up to the window's end, and ``until_lsn``), in
        commit order. A Relation under the name starts a relation's time with it; the
        next one of the relation, or another's under the name, ends it. The relation
        whose time runs at the end bears it (none after a rename away). Relations
        before the window and a checkpoint's count for which one bears it, but "another
        bore it" only if its time reached into the window (or a resumed run): else a
        table replaced long ago would make every later batch begin with a truncate."""
        if not len(self.ev_rel):
            return None, False
        named = np.array([v["schema"] == schema and v["table"] == table for v in self.versions], dtype=bool)
        one = one_bearer([(v["relation_id"], ok) for v, ok in zip(self.versions, named, strict=True)])
        if one and self.versions[one[0]]["relation_id"] is not None:
            # one relation ever bore the name, and only it (the common case; the rows'
            # rule too): it bears it as of any commit. Its Relation may have come in a
            # transaction that commits after others used it, or never (a prepared one
            # committed later, rolled back, still open at the end): the server sends a
            # schema once, so other transactions' rows rely on it all the same, and
            # going by the Relations' commits chose no table
            return self.versions[one[0]]["relation_id"], False
        # each Relation's transaction: its segment's (as for rows); a checkpoint's
        # definitions and those of transactions begun before the archive come first, in
        # the checkpoint's order (their version indexes)
        seg = np.searchsorted(self.ctrl_keys, self.ev_key, side="left")
        slot = np.where(self.ev_key == BEFORE_ALL, -1, self.seg_slot[np.minimum(seg, len(self.seg_slot) - 1)])
        rank = self._commit_positions(slot)
        # a Relation before the archive's first Begin, in the context open before it
        # that never commits (an archive put together by a tool: no server sends one
        # outside a transaction), defines its relation for all that follows, as the
        # decoder reads it: it counts from the start, as a checkpoint's do
        slot = np.where((slot == self.seg_slot[0]) & (rank < 0), -1, slot) if len(self.seg_slot) else slot
        start = None      # where the batch begins: (commit rank, key)
        if len(self.commit_slots):
            hit = rank >= 0
            lsn = pc.fill_null(self.commit_lsn, 0).to_numpy(zero_copy_only=False).astype(np.uint64)
            end = self.window[1] if self.window is not None else None
            if until_lsn is not None:
                end = int(until_lsn) if end is None else min(end, int(until_lsn))
            late = hit & (lsn[np.maximum(rank, 0)] > np.uint64(end)) if end is not None else np.zeros(len(hit), bool)
            keep = (slot < 0) | (hit & ~late)
            if self.window is not None and self.window[0] is not None:
                inside = np.flatnonzero(self.in_window)
                start = (int(inside[0]) if len(inside) else len(lsn), BEFORE_ALL)
        else:
            keep = slot < 0
        if start is None and self.start_key is not None:
            start = (0, BEFORE_ALL)    # a resumed run: its own commits
        order = np.lexsort((self.ev_ver[keep], self.ev_key[keep], rank[keep]))
        cur, replaced = None, False
        for r, k, rel, v in zip(rank[keep][order].tolist(), self.ev_key[keep][order].tolist(),
                                self.ev_rel[keep][order].tolist(), self.ev_ver[keep][order].tolist(), strict=True):
            if cur is not None and cur != rel and not named[v]:
                continue                         # another table's Relation
            if cur is not None and (cur != rel or not named[v]):
                # cur's time with the name ends here: replaced, or renamed away
                replaced = replaced or start is None or (r, k) > start
                cur = None
            if named[v]:
                cur = rel
        return cur, replaced and cur is not None

    def copied_relations(self) -> dict:
        """{relation id: the commit LSN of the first COPY transaction (xid 0) that named
        it}, among the transactions the plan gives: the tables whose rows the archive
        holds as copied rows ('R'). A COPY transaction sends each table's Relation before
        its rows, so the Relation events say it, with no row decoded."""
        if not len(self.ev_rel) or not len(self.commit_slots):
            return {}
        seg = np.searchsorted(self.ctrl_keys, self.ev_key, side="left")
        slot = np.where(self.ev_key == BEFORE_ALL, -1, self.seg_slot[np.minimum(seg, len(self.seg_slot) - 1)])
        rank = self._commit_positions(slot)
        xid = pc.fill_null(self.commit_xid, COPY_XID + 1).to_numpy(zero_copy_only=False)
        lsn = pc.fill_null(self.commit_lsn, 0).to_numpy(zero_copy_only=False)
        hit = rank >= 0
        hit[hit] = xid[rank[hit]] == COPY_XID
        if self.in_window is not None:
            hit[hit] = self.in_window[rank[hit]]
        out: dict = {}
        for rel, r in zip(self.ev_rel[hit].tolist(), rank[hit].tolist(), strict=True):
            out[rel] = min(out.get(rel, int(lsn[r])), int(lsn[r]))
        return out

    def for_keys(self, lo: int, hi: int) -> "ControlPlan":
        """This plan for the rows with order key ``lo <= key <= hi`` only: what
        :meth:`changes`, :meth:`change_rows`, :meth:`keep_mask` and :meth:`head_facts`
        give for those rows is what the whole plan gives (ranks included), for other rows
        it is undefined. What a partition of a data source carries instead of the whole
        plan, so P partitions ship the plan about once, not P times: the segments in the
        range, the commits of their transactions, and the Relation events in force at
        ``lo`` or sent in the range. The Relation versions themselves stay whole (few;
        indexes into them are the plan's). Not for the driver's questions:
        :meth:`checkpoint` refuses, and :meth:`dropped_key_ranges` describes the range only."""
        lo, hi = int(lo), int(hi)
        if self.key_range is not None:
            lo, hi = max(lo, self.key_range[0]), min(hi, self.key_range[1])
        other = copy.copy(self)
        other.key_range = (lo, hi)
        s0, s1 = np.searchsorted(self.ctrl_keys, [lo, hi], side="left")
        other.ctrl_keys = self.ctrl_keys[s0:s1]
        other.seg_slot, other.seg_stream = self.seg_slot[s0:s1 + 1], self.seg_stream[s0:s1 + 1]
        # the commits of the transactions whose rows the range holds, by their position
        slots = np.unique(other.seg_slot)
        o = np.argsort(self.commit_slots, kind="stable")
        pos = np.minimum(np.searchsorted(self.commit_slots[o], slots), max(len(o) - 1, 0))
        hit = (self.commit_slots[o][pos] == slots) if len(o) else np.zeros(len(slots), bool)
        local = np.sort(o[pos[hit]])
        take = pa.array(local, pa.int64())
        other.commit_slots = self.commit_slots[local]
        other.commit_xid, other.commit_lsn = self.commit_xid.take(take), self.commit_lsn.take(take)
        other.commit_ts, other.commit_origin = self.commit_ts.take(take), self.commit_origin.take(take)
        other.commit_ranks = local if self.commit_ranks is None else self.commit_ranks[local]
        other.in_window = None if self.in_window is None else self.in_window[local]
        at = {int(g): i for i, g in enumerate(local)}
        other.aborted = {at[k]: v for k, v in self.aborted.items() if k in at}
        # Relation events: the last one of each relid before lo, and those in the range
        before = self.ev_key < lo
        same_next = np.r_[self.ev_rel[1:] == self.ev_rel[:-1], False]
        last_before = before & ~(same_next & np.r_[before[1:], False])
        ev = last_before | (~before & (self.ev_key <= hi))
        other.ev_rel, other.ev_key, other.ev_ver = self.ev_rel[ev], self.ev_key[ev], self.ev_ver[ev]
        # the driver's: what a run leaves open, its errors and replays, its Types
        other.type_events, other.open_transactions, other.live_slots = [], [], set()
        other.errors, other.replayed = [], []
        return other

    def change_rows(self, values, order, lsn=None) -> pa.Table:
        """:meth:`changes` (``errors="raise"``) aligned with the input: one row per input
        row, in input order — the change row of each kept I/U/D row, a null row for every
        other row (control, Truncate, inert, or a change :meth:`changes` leaves out).
        Spark's field UDFs get the rows the row filters keep, but a query's own filter on
        a decoded field is evaluated next to those filters, on every row before them."""
        keys = order_keys(order)
        t = self.changes(values, keys, lsn, errors="raise")
        seq = t.column("seq").to_numpy(zero_copy_only=False)
        if len(t) == len(keys) and np.array_equal(seq, keys):
            return t                                    # every row a kept change: the common case
        t = t.filter(pc.not_equal(t.column("op"), "T"))  # one row per relation: not one per payload
        o = np.argsort(keys, kind="stable")
        return spread_rows(t, o[np.searchsorted(keys[o], t.column("seq").to_numpy(zero_copy_only=False))], len(keys))

    def _emitted(self, table: pa.Table, rank: np.ndarray) -> pa.Table:
        """``table``'s change rows with the commit facts of their transactions (``rank``:
        each row's commit rank in the whole plan; ``rows.with_commits``) and ``commit_rank``."""
        at = rank if self.commit_ranks is None else np.searchsorted(self.commit_ranks, rank)
        table = with_commits(table, at, self.commit_xid, self.commit_lsn, self.commit_ts, self.commit_origin)
        return table.append_column("commit_rank", pa.array(rank + self.rank_base, pa.int64()))

    def _rows(self, msgs, idx, rank, ver, keys, lsn_arr) -> pa.Table:
        cols = change_columns(msgs, idx, ver, self.version_table, pa.array(keys[idx], pa.int64()), lsn_arr)
        return self._emitted(pa.table(cols), np.asarray(rank, np.int64))

    def _truncates(self, msgs, idx, rank, keys, lsn_arr) -> pa.Table:
        cols, at, _ = truncate_columns(msgs, idx, self.version_table,
                                       lambda rids, rows: self._versions_at(rids, keys[rows]),
                                       pa.array(keys, pa.int64()), lsn_arr)
        pos = np.searchsorted(idx, at)          # idx ascending: each row's message among them
        return self._emitted(pa.table(cols), np.asarray(rank, np.int64)[pos])


def checkpoint_after(values, order, *, envelope: str = "auto", resume=None, **options) -> Checkpoint:
    """The checkpoint of a single-process run (``decode_changes(..., resume=)`` or a
    ``ChangeDecoder``) over these rows — the ones it was fed, with their order keys:
    a :class:`ControlPlan` over their control rows, with the run's options."""
    values = one_binary(values)
    keys = order_keys(order)
    mask = control_candidates(values, envelope=envelope)
    return ControlPlan.build(values.filter(pa.array(mask)), keys[mask], envelope=envelope, resume=resume,
                             **options).checkpoint()


def decode_changes_parallel(values, order=None, lsn=None, *, splits: int = 4, **options) -> pa.Table:
    """Single-process form of the parallel path: plan over the control rows, then decode
    the archive in ``splits`` independent pieces, one after another; equals
    ``decode_changes`` (:func:`pgoutput_codec.changes.parallel.changes_by_pieces` runs the pieces
    on threads)."""
    values = one_binary(values)
    keys = np.arange(len(values), dtype=np.int64) if order is None else order_keys(order)
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], **options)
    return changes_of_pieces(plan, values, keys, lsn_array(lsn, len(values)),
                             np.linspace(0, len(values), splits + 1, dtype=int), 1)


def changes_of_pieces(plan: ControlPlan, values: pa.Array, keys: np.ndarray, lsn: pa.Array, bounds,
                      workers: int) -> pa.Table:
    """``plan.changes`` of ``values`` cut at row ``bounds``, the pieces on up to
    ``workers`` threads, joined in commit order (without ``commit_rank``)."""
    pairs = list(zip(np.asarray(bounds[:-1]).tolist(), np.asarray(bounds[1:]).tolist(), strict=True))
    parts = run_pieces(lambda ab: plan.changes(values.slice(ab[0], ab[1] - ab[0]), keys[ab[0]:ab[1]],
                                               lsn.slice(ab[0], ab[1] - ab[0])), pairs, workers)
    out = pa.concat_tables(parts)
    order = commit_order(out.column("commit_rank").to_numpy(), out.column("seq").to_numpy())
    if order is not None:
        out = take_table(out, order)
    return out.drop_columns(["commit_rank"])
