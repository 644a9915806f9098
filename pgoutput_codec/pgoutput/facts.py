"""The facts of every pgoutput message, in one table: what a tag byte is.

One row per message, in the order of docs/protocol.md, declared beside its class in
``messages.py`` (``@message(control=True, ...)``): the class (which holds its tag,
``cls.type``, and its fields), and what the rest of the package asks of a tag:

- ``streamable``: inside a Stream Start/Stop block it carries the streaming xid right
  after the tag (``proto.c``: "transaction ID (if not valid, we're not streaming)");
- ``control``: it drives the transaction walk (every other message is a change, or inert);
- ``ends``: it ends a transaction (after it, no transaction is open unless another was
  across it);
- ``change``: it makes change rows;
- ``features``: the publication options a server needs to send it.

Every tag set of the package is read from here: the plain-Python parser's dispatch
(``_parse_py``), the encoder, the plan's and the walk's tag masks, ``inspect``'s
features. The compiled modules read ``_facts.pxd``, written from this table by
:func:`write_declarations` and held equal to it by a test.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from .messages import DECLARED, PrimaryKeepalive, Truncate, XLogData

__all__ = ["MessageFacts", "MESSAGES", "ENVELOPES", "FACTS", "MESSAGE_CLASSES", "PGOUTPUT_TAGS", "ENVELOPE_TAGS",
           "STREAMABLE_TAGS", "CONTROL_TAGS", "END_TAGS", "CHANGE_TAGS", "ROW_CHANGE_TAGS", "FEATURE_TAGS",
           "cython_declarations", "write_declarations"]


@dataclasses.dataclass(frozen=True)
class MessageFacts:
    """One message's facts (see the module's text)."""

    cls: type
    streamable: bool = False
    control: bool = False
    ends: bool = False
    change: bool = False
    features: tuple = ()

    @property
    def tag(self) -> str:
        return self.cls.type

    @property
    def name(self) -> str:
        return self.cls.__name__

    @property
    def fields(self) -> tuple:
        """The message's field names, in the order of its class."""
        return tuple(f.name for f in dataclasses.fields(self.cls))


_F = MessageFacts
_S, _T = "streaming", "two-phase"

#: The 19 pgoutput messages, in the order of docs/protocol.md: each row is declared with
#: its class in messages.py (``@message(...)``).
MESSAGES = tuple(_F(cls, **facts) for cls, facts in DECLARED)

#: The replication envelope around them: 'w' XLogData, 'k' keepalive.
ENVELOPES = (_F(XLogData), _F(PrimaryKeepalive))

#: Tag -> its facts, pgoutput messages and envelopes.
FACTS = {f.tag: f for f in MESSAGES + ENVELOPES}

#: Tag -> its message class (``MESSAGE_CLASSES["I"] is Insert``).
MESSAGE_CLASSES = {t: f.cls for t, f in FACTS.items()}
#: The 19 pgoutput message tags, in the order of docs/protocol.md.
PGOUTPUT_TAGS = "".join(f.tag for f in MESSAGES)
#: Replication envelope tags decoded by ``decode_message`` / ``decode_batch``.
ENVELOPE_TAGS = "".join(f.tag for f in ENVELOPES)
#: Messages that carry the streaming xid right after the tag inside S…E.
STREAMABLE_TAGS = "".join(f.tag for f in MESSAGES if f.streamable)
#: Messages that drive the transaction walk (every other one is a change, I U D T, or
#: inert, M); all but R, Y and O begin or end a transaction or a stream block.
CONTROL_TAGS = "".join(f.tag for f in MESSAGES if f.control)
#: Messages that end a transaction (Commit, Stream Commit/Abort, Prepare, Commit/Rollback
#: Prepared, Stream Prepare): after one, no transaction is open unless another was across it.
END_TAGS = "".join(f.tag for f in MESSAGES if f.ends)
#: Messages that make change rows.
CHANGE_TAGS = "".join(f.tag for f in MESSAGES if f.change)
#: Messages that change one row (a Truncate changes whole tables).
ROW_CHANGE_TAGS = "".join(f.tag for f in MESSAGES if f.change and f.cls is not Truncate)
#: Publication option -> the tags only a server with it sends.
FEATURE_TAGS = {feat: "".join(f.tag for f in MESSAGES if feat in f.features) for feat in (_S, _T)}


def _or_chain(var: str, tags: str) -> str:
    return "(" + "\n            or ".join(f"{var} == TAG_{_constant(FACTS[t].name)}" for t in tags) + ")"


def _constant(name: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).upper()


def cython_declarations() -> str:
    """The text of ``_facts.pxd``: each tag as a ``TAG_<NAME>`` constant, and the tag set
    the compiled parser and batch decoder ask about as an inline test."""
    lines = ["# cython: language_level=3",
             "# Written by facts.write_declarations() from the table of pgoutput_codec/pgoutput/facts.py;",
             "# tests/pgoutput/test_facts.py holds it equal to the table. Do not edit by hand.",
             "",
             "from libc.stdint cimport uint8_t",
             "",
             "",
             "cdef enum:"]
    lines += [f"    TAG_{_constant(f.name)} = {ord(f.tag)}  # '{f.tag}'" for f in MESSAGES + ENVELOPES]
    lines += ["", "", "# the messages that carry the streaming xid inside a stream block",
              "cdef inline bint is_streamable(uint8_t t) noexcept nogil:",
              f"    return {_or_chain('t', STREAMABLE_TAGS)}"]
    return "\n".join(lines) + "\n"


def write_declarations() -> Path:
    """Write ``_facts.pxd`` beside this module (after a change to the table; then rebuild)."""
    path = Path(__file__).with_name("_facts.pxd")
    path.write_text(cython_declarations())
    return path
