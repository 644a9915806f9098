"""Transaction boundaries read from tags alone (changes.boundaries): where capture may cut
a slot's rows, and which rows sit in which plain transaction, whatever the batches."""

from __future__ import annotations

import numpy as np
import pytest

from pgoutput_codec import (Begin, BeginPrepare, Commit, CommitPrepared, Insert, LogicalMessage, Prepare,
                            StreamAbort, StreamCommit, StreamStart, StreamStop, encode_message)
from pgoutput_codec.changes.boundaries import Boundaries, boundaries

from change_cases import row


def _ins(xid=None):
    return Insert(xid=xid, relation_id=1, new_tuple=row(1, "a"))


def test_capture_cuts_only_where_no_transaction_is_open():
    """A Commit, Prepare, Commit Prepared, Stream Commit or a message outside a
    transaction closes; nothing closes while a plain or streamed transaction is open,
    and a Stream Abort of a whole transaction lets the cut come at the next end."""
    msgs = [
        (Begin(final_lsn=10, commit_ts=1, xid=5), False), (_ins(), False), (Commit(commit_lsn=10, end_lsn=11, commit_ts=1), True),
        (StreamStart(xid=7, first_segment=True), False), (_ins(7), False), (StreamStop(), False),
        (Begin(final_lsn=20, commit_ts=2, xid=6), False), (Commit(commit_lsn=20, end_lsn=21, commit_ts=2), False),
        (StreamStart(xid=7, first_segment=False), False), (StreamStop(), False),
        (StreamCommit(xid=7, flags=0, commit_lsn=30, end_lsn=31, commit_ts=3), True),
        (StreamStart(xid=8, first_segment=True), False), (_ins(8), False), (StreamStop(), False),
        (StreamAbort(xid=8, subxid=9), False),
        (LogicalMessage(flags=0, lsn=35, prefix="p", content=b"x"), False),
        (StreamAbort(xid=8, subxid=8), False),
        (LogicalMessage(flags=0, lsn=36, prefix="p", content=b"x"), True),
        (BeginPrepare(prepare_lsn=40, end_lsn=41, prepare_ts=4, xid=10, gid="g"), False), (_ins(), False),
        (Prepare(flags=0, prepare_lsn=40, end_lsn=41, prepare_ts=4, xid=10, gid="g"), True),
        (CommitPrepared(flags=0, commit_lsn=50, end_lsn=51, commit_ts=5, xid=10, gid="g"), True),
    ]
    b = Boundaries()
    assert [b.closes(encode_message(m)) for m, _ in msgs] == [want for _, want in msgs]


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 100])
def test_transaction_spans_do_not_depend_on_the_batches(cut):
    """Each row's plain transaction (inside, xid, lsn) is the same fed in one batch or in
    batches of any size; a row before any Begin sits in the transaction carried in."""
    tags = np.frombuffer(b"IBIICIBIC", np.uint8)
    xid = np.array([0, 7, 0, 0, 0, 0, 0, 0, 0], np.int64)
    lsn = np.array([0, 70, 0, 0, 0, 0, 90, 0, 0], np.uint64)
    begin, end = tags == ord("B"), tags == ord("C")
    whole = boundaries(begin, end, xid, lsn, [True, 3, 30])
    assert whole[0].tolist() == [True, True, True, True, False, False, True, True, False]
    assert whole[1][:4].tolist() == [3, 7, 7, 7] and whole[2][6] == 90
    carried, parts = [True, 3, 30], []
    for a in range(0, len(tags), cut):
        s = slice(a, a + cut)
        parts.append(boundaries(begin[s], end[s], xid[s], lsn[s], carried))
    for k in range(3):
        got, want = np.concatenate([p[k] for p in parts]), whole[k]
        assert np.array_equal(got[whole[0]], want[whole[0]]), k
    assert carried == [False, 0, 0]
