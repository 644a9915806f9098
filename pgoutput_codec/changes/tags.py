"""What a row is by its tag byte alone: control (drives the transaction walk), change, or inert;
and how many head bytes tell an I/U/D row's relation and key."""

from __future__ import annotations

import numpy as np

from ..pgoutput import facts
from ..pgoutput.batch import message_tags
from ..pgoutput.messages import PrimaryKeepalive
from .checkpoint import BEFORE_ALL

__all__ = ["CONTROL_TAGS", "INERT_TAGS", "ENVELOPE_INERT_TAGS", "HEAD_BYTES", "IS_CONTROL", "IS_CHANGE", "IS_ROW_CHANGE",
           "BEFORE_ALL", "control_candidates"]

#: Tags whose messages drive the state; every other row is a change (I U D T) or inert (M k).
CONTROL_TAGS = facts.CONTROL_TAGS.encode()

IS_CONTROL = np.zeros(256, dtype=bool)
for _t in CONTROL_TAGS:
    IS_CONTROL[_t] = True

IS_CHANGE = np.zeros(256, dtype=bool)
for _t in facts.CHANGE_TAGS.encode():
    IS_CHANGE[_t] = True

#: Tags of messages that never make a change row: logical decoding messages ('M') and,
#: in a replication envelope, keepalives ('k').
INERT_TAGS = "".join(f.tag for f in facts.MESSAGES if not f.control and not f.change).encode()

ENVELOPE_INERT_TAGS = PrimaryKeepalive.type.encode()

#: Bytes of a payload that :meth:`ControlPlan.keep_mask` reads: an XLogData header (25),
#: the tag, a streaming xid and the relation id (I/U/D all start tag, [xid], relid), and
#: the byte after it (an Update's 'K'/'O' when it sends its old key or row).
HEAD_BYTES = 25 + 1 + 4 + 4 + 1


IS_ROW_CHANGE = np.zeros(256, dtype=bool)
for _t in facts.ROW_CHANGE_TAGS.encode():
    IS_ROW_CHANGE[_t] = True


def control_candidates(values, *, envelope: str = "auto") -> np.ndarray:
    """Boolean mask of the rows whose message is a control message (by tag byte only)."""
    return IS_CONTROL[message_tags(values, envelope=envelope)]
