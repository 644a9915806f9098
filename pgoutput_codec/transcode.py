"""Archives captured in another client encoding, rewritten as the UTF-8 archive a UTF-8
session would have captured.

PostgreSQL converts what a logical decoding session sends into that session's
``client_encoding`` (``pq_sendstring`` / ``pq_sendcountedtext`` / ``pq_sendtext``
convert; ``pq_sendbytes`` does not). A session that never sets it gets the database's
encoding: ``psycopg``, ``pg_recvlogical`` or a ``SELECT … pg_logical_slot_get_binary_changes``
job against a ``LATIN1`` database archives LATIN1 bytes. The decoders read names as strict
UTF-8 and text values as UTF-8 (Arrow strings are UTF-8), so such an archive is refused
("relation_name is not valid UTF-8"). ``pgoutput-codec capture`` sets ``client_encoding``
to UTF8 for this reason.

What a session converts, and so what :func:`transcode_payloads` converts back:

- every String: namespaces, relation, column and type names, origin names, message
  prefixes, transaction gids;
- every text-form ('t') value: a type's output function prints in the server's encoding
  and the whole text is converted;
- a binary ('b') value of a text type (``text``, ``varchar``, ``bpchar``, ``name``,
  ``json``, ``xml``, ``jsonb`` after its version byte, a domain over one of these, an
  enum registered in ``registry``), and the elements of a binary array of one.

What it leaves as sent: a logical message's content (``pq_sendbytes``: never converted),
``"char"`` (one raw byte), and binary values of types the catalog does not know (an
unregistered enum, a composite, an extension's type): their send forms are the type's
own business.

The rewrite walks the archive in order, as a session sent it: it tracks Stream Start/Stop
(inside a block, R/Y/I/U/D/T/M carry an xid) and the Relation and Type messages (which
column has which type). A payload whose bytes are all ASCII and that is not a Relation,
Type or Stream Start/Stop is the same in every encoding PostgreSQL supports as a client
encoding, and is kept without decoding it. Row changes are rewritten by a compiled loop
over the batch's Arrow buffers (``_transcode.pyx``). Every other payload takes the plain
path: decoded (by the plain-Python decoder, with Strings in the archive's encoding), its
values converted, and encoded again (``encode_message``). Either way the result is byte
for byte what a UTF-8 session receives (tests/conformance/test_encodings.py compares them
on real servers; tests/test_transcode.py the loop with the plain path). Spark:
:mod:`pgoutput_codec.spark.transcode`, with a :class:`Timeline` of the state.
"""

from __future__ import annotations

import bisect
import codecs
import copy
import struct
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from ._native import USING_EXTENSIONS
from . import typecatalog as tc
from .typecatalog.registry import resolve
from .pgoutput._parse_py import as_bytes, decode_row, infer_initial_state, payload_values
from .pgoutput.encode import encode_message
from .pgoutput.facts import ROW_CHANGE_TAGS
from .errors import PgoutputCodecError, PgoutputDecodeError
from .pgoutput.messages import Delete, Insert, Relation, StreamStart, StreamStop, Type, Update, XLogData

__all__ = ["TranscodeError", "TranscodeReport", "Timeline", "Transcoder", "is_utf8", "pg_encoding_name", "python_codec",
           "transcode_payloads", "transcode_archive"]

#: PostgreSQL's encoding names (``pg_encoding_to_char``) -> Python codec names. PostgreSQL's
#: SJIS is Microsoft's code page 932 (its aliases include WIN932), UHC is 949. SQL_ASCII is
#: absent on purpose: a SQL_ASCII database converts nothing, so the bytes are whatever its
#: clients stored, and only the user can say which encoding that was.
PG_ENCODINGS = {
    "UTF8": "utf-8", "SQL_ASCII": None, "LATIN1": "latin-1", "LATIN2": "iso8859-2", "LATIN3": "iso8859-3",
    "LATIN4": "iso8859-4", "LATIN5": "iso8859-9", "LATIN6": "iso8859-10", "LATIN7": "iso8859-13",
    "LATIN8": "iso8859-14", "LATIN9": "iso8859-15", "LATIN10": "iso8859-16", "ISO_8859_5": "iso8859-5",
    "ISO_8859_6": "iso8859-6", "ISO_8859_7": "iso8859-7", "ISO_8859_8": "iso8859-8", "WIN866": "cp866",
    "WIN874": "cp874", "WIN1250": "cp1250", "WIN1251": "cp1251", "WIN1252": "cp1252", "WIN1253": "cp1253",
    "WIN1254": "cp1254", "WIN1255": "cp1255", "WIN1256": "cp1256", "WIN1257": "cp1257", "WIN1258": "cp1258",
    "KOI8R": "koi8-r", "KOI8U": "koi8-u", "EUC_JP": "euc_jp", "EUC_JIS_2004": "euc_jis_2004",
    "EUC_KR": "euc_kr", "EUC_CN": "gb2312", "SJIS": "cp932", "SHIFT_JIS_2004": "shift_jis_2004",
    "BIG5": "big5", "GBK": "gbk", "UHC": "cp949", "GB18030": "gb18030", "JOHAB": "johab",
}


#: PostgreSQL's other names for its encodings (``pg_encname_tbl``, cleaned), as a server
#: reads them: ``pg_encoding_to_char(pg_char_to_encoding(alias))`` on 15, 16 and 18
#: (tests/conformance/test_encodings.py asks the server). Python's codec registry knows
#: some under other spellings only (``windows1252`` no, ``windows-1252`` yes), and reads
#: ``shiftjis`` as ``shift_jis`` where PostgreSQL's is SJIS, code page 932.
_PG_ALIASES = {
    "ABC": "WIN1258", "TCVN": "WIN1258", "TCVN5712": "WIN1258", "VSCII": "WIN1258", "ALT": "WIN866",
    "WIN": "WIN1251", "KOI8": "KOI8R", "UNICODE": "UTF8", "MSKANJI": "SJIS", "SHIFTJIS": "SJIS",
    "WIN932": "SJIS", "WINDOWS932": "SJIS", "WIN936": "GBK", "WINDOWS936": "GBK", "WIN949": "UHC",
    "WINDOWS949": "UHC", "WIN950": "BIG5", "WINDOWS950": "BIG5", "WINDOWS866": "WIN866",
    "WINDOWS874": "WIN874",
    **{f"ISO8859{n}": f"LATIN{k}" for n, k in ((1, 1), (2, 2), (3, 3), (4, 4), (9, 5), (10, 6), (13, 7),
                                                 (14, 8), (15, 9), (16, 10))},
    **{f"WINDOWS{n}": f"WIN{n}" for n in range(1250, 1259)},
}
#: PostgreSQL encodings Python has no codec for: named, so the error says so.
_NO_PYTHON_CODEC = {"EUCTW", "MULEINTERNAL"}


def _clean(name):
    """As PostgreSQL's clean_encoding_name: letters and digits only, case ignored."""
    return "".join(ch for ch in name.upper() if ch.isalnum())


def _pg_key(name):
    """``name`` cleaned, an alias read as the PostgreSQL name it stands for."""
    key = _clean(name)
    return _PG_ALIASES.get(key, key)


_BY_CLEAN_NAME = {_clean(k): v for k, v in PG_ENCODINGS.items()}


class TranscodeError(PgoutputCodecError, ValueError):
    """A payload that cannot be rewritten: ``row`` (its index), ``offset`` and
    ``message_type`` where known."""

    def __init__(self, text, row, offset=None, message_type=None, reason=None):
        super().__init__(text)
        self.row, self.offset, self.message_type = row, offset, message_type
        self.reason = reason or text    # without the row: a Spark task names the order key

    def __reduce__(self):
        return (type(self), (self.args[0], self.row, self.offset, self.message_type, self.reason))


@dataclass
class TranscodeReport:
    """What :func:`transcode_payloads` did: ``rows`` in, ``rewritten`` (their bytes
    changed), ``kept`` (decoded but already the same in UTF-8, or all ASCII), and under
    ``errors="keep"``, ``left_as_sent``: (row, reason) of the rows it could not rewrite."""
    rows: int = 0
    rewritten: int = 0
    kept: int = 0
    left_as_sent: list = field(default_factory=list)


def python_codec(encoding: str) -> str:
    """The Python codec of a PostgreSQL encoding name (``LATIN1``, ``WIN1252``, ``EUC_JP``;
    as PostgreSQL reads them, case and punctuation ignored: ``euc-jp``) or of a Python
    codec name (``latin-1``, ``cp1252``)."""
    key = _pg_key(encoding)
    if key in _BY_CLEAN_NAME:
        name = _BY_CLEAN_NAME[key]
        if name is None:
            raise ValueError("SQL_ASCII is no encoding: a SQL_ASCII database stores its clients' bytes "
                             "unconverted; name the encoding they wrote (e.g. LATIN1, WIN1252)")
        return codecs.lookup(name).name
    if key in _NO_PYTHON_CODEC:
        raise ValueError(f"{encoding!r} is a PostgreSQL encoding Python has no codec for: not supported")
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise ValueError(f"unknown encoding {encoding!r} (a PostgreSQL name such as LATIN1, WIN1252, "
                         "EUC_JP, or a Python codec name)") from None


def is_utf8(encoding: str) -> bool:
    """Whether an archive captured under ``encoding`` is already what the decoders read, so
    nothing is rewritten (``UTF8``, ``utf-8``, ``unicode``...). Raises ValueError for a name
    :func:`python_codec` does not know, SQL_ASCII included."""
    return python_codec(encoding) == "utf-8"


def pg_encoding_name(encoding: str) -> str:
    """PostgreSQL's name (``LATIN1``) of an encoding named as :func:`python_codec` reads
    names (``latin-1``, ``iso-8859-1``, ``Latin1``); Python's codec name for one
    PostgreSQL does not have. What an archive rewritten here records, one spelling
    whoever named it."""
    codec, key = python_codec(encoding), _pg_key(encoding)
    names = [k for k, v in PG_ENCODINGS.items() if v is not None and codecs.lookup(v).name == codec]
    return next((k for k in names if _clean(k) == key), names[0] if names else codec)


#: the schema metadata key of an archive rewritten here: the encoding it was rewritten
#: from, by PostgreSQL's name (:func:`pg_encoding_name`)
TRANSCODED_FROM = b"pgoutput_codec.transcoded_from"
#: the rows that carry the walk's state: Relation, Type, Stream Start, Stream Stop (always
#: decoded; a Timeline is built from them alone)
STATE_TAGS = b"RYSE"
_STATE = frozenset(STATE_TAGS)
_ROW_TAGS = frozenset(ROW_CHANGE_TAGS.encode())
# the compiled loop, unless PGOUTPUT_CODEC_NO_EXTENSIONS selects the plain-Python rewrite
if USING_EXTENSIONS:
    from . import _transcode as _loop
    from ._transcode import rewrite_batch as _rewrite_batch

    #: envelope -> the compiled loop's code
    _ENVELOPE_CODE = {"auto": _loop.ENV_AUTO, "none": _loop.ENV_NONE, "xlogdata": _loop.ENV_XLOGDATA}
    #: _Walk._kind -> the compiled loop's code
    _KIND_CODE = {None: _loop.KIND_NONE, "text": _loop.KIND_TEXT, "jsonb": _loop.KIND_JSONB,
                  "array": _loop.KIND_ARRAY}
else:      # the plain path alone: the twin the compiled loop is tested against
    _rewrite_batch = None


class _Walk:
    """The state a session's messages build: in a stream block or not, each relation's
    column types, the Type messages' user types."""

    def __init__(self, codec, registry, envelope, in_stream):
        self.codec = codec
        self.registry = registry if registry is not None else tc.TypeRegistry()
        self.envelope = envelope
        self.in_stream = None if in_stream is None else bool(in_stream)
        self.types = {}         # relation_id -> (type OID, ...) of its columns
        self.resolved = {}
        self.kinds = {}         # relation_id -> bytes, a _KIND_* per column, for the compiled loop
        self.codec_c = codec.encode()
        self.latin1 = codec == "iso8859-1"

    def apply(self, event):
        """One event of a :class:`Timeline` (what a state row did to the walk)."""
        what, arg = event
        if what == "S":
            self.in_stream = True
        elif what == "E":
            self.in_stream = False
        elif what == "R":
            self.types[arg[0]] = arg[1]
            self.kinds.pop(arg[0], None)
        elif what == "Y":
            self.registry.add_type_message(*arg)
            self.resolved.clear()   # the Type message may make a column's type a text one
            self.kinds.clear()

    def after_failure(self, raw):
        """A row left as sent still moves the stream state, as its tag says: the event
        applied, or None."""
        tag = _tag(raw, self.envelope)
        event = ("S", None) if tag == 0x53 else ("E", None) if tag == 0x45 else None
        if event is not None:
            self.apply(event)
        return event

    # ---- values
    def text(self, raw):
        return raw.decode(self.codec).encode("utf-8")

    def _kind(self, oid):
        """'text' | 'jsonb' | ('array', element kind or None) | None: how a send form of
        ``oid`` holds converted text."""
        r = self.resolved.get(oid)
        if r is None:
            r = self.resolved[oid] = _text_kind(resolve(oid, -1, self.registry))
        return r

    def binary(self, raw, kind):
        if kind == "text":
            return self.text(raw)
        if kind == "jsonb":
            return raw[:1] + self.text(raw[1:])
        return self.array(raw, kind[1])

    def array(self, b, elem):
        """array_send: ndim, hasnull, element OID, (dim, lower bound) per dimension, then
        each element as int32 length (-1: null) and its send form."""
        if len(b) < 12:
            raise ValueError("array send form shorter than its header")
        ndim, _, elemoid = struct.unpack_from(">iiI", b)
        if elem is None:
            elem = self._kind(elemoid)
        pos = 12 + 8 * ndim
        if ndim < 0 or len(b) < pos or elem is None:
            return b
        out = [b[:pos]]
        while pos < len(b):
            if len(b) < pos + 4:
                raise ValueError("array element length missing")
            (n,) = struct.unpack_from(">i", b, pos)
            pos += 4
            if n < 0:
                out.append(b[pos - 4:pos])
                continue
            if len(b) < pos + n:
                raise ValueError("array element longer than the array")
            v = self.binary(b[pos:pos + n], elem)
            out.append(struct.pack(">i", len(v)) + v)
            pos += n
        return b"".join(out)

    def tuple_(self, relation_id, tup):
        if tup is None:
            return None
        types = self.types.get(relation_id, ())
        out = []
        for i, c in enumerate(tup):
            if c.kind == "t":
                c = c._replace(data=self.text(c.data))
            elif c.kind == "b":
                kind = self._kind(types[i]) if i < len(types) else None
                if kind is not None:
                    c = c._replace(data=self.binary(c.data, kind))
            out.append(c)
        return tuple(out)

    # ---- messages
    def message(self, m):
        if isinstance(m, XLogData):
            return replace(m, payload=self.message(m.payload))
        event = _event_of(m)
        if event is not None:
            self.apply(event)
        elif isinstance(m, Insert):
            return replace(m, new_tuple=self.tuple_(m.relation_id, m.new_tuple))
        elif isinstance(m, Update):
            return replace(m, old_tuple=self.tuple_(m.relation_id, m.old_tuple),
                           new_tuple=self.tuple_(m.relation_id, m.new_tuple))
        elif isinstance(m, Delete):
            return replace(m, old_tuple=self.tuple_(m.relation_id, m.old_tuple))
        return m

    def _kinds_of(self, relation_id):
        ks = self.kinds.get(relation_id)
        if ks is None:
            codes = (self._kind(oid) for oid in self.types.get(relation_id, ()))
            ks = self.kinds[relation_id] = bytes(_KIND_CODE["array" if isinstance(k, tuple) else k] for k in codes)
        return ks

    def payload(self, raw):
        """The payload as a UTF-8 session receives it; raises PgoutputDecodeError,
        UnicodeError or ValueError. (The compiled loop does the first two steps itself.)"""
        if _tag(raw, self.envelope) not in _STATE and raw.isascii():
            return raw
        m = decode_row(raw, self.envelope, self.in_stream, self.codec)
        return encode_message(self.message(m))


def _tag(raw, envelope):
    """The tag byte of a payload (inside an XLogData frame unless ``envelope="none"``), 0
    when there is none: what the compiled loop reads too."""
    start = 25 if raw[:1] == b"w" and envelope != "none" else 0
    return raw[start] if len(raw) > start else 0


def _event_of(m):
    """What a state message does to the walk, as a :class:`Timeline` event; None for
    the other messages."""
    if isinstance(m, (StreamStart, StreamStop)):
        return ("S" if isinstance(m, StreamStart) else "E", None)
    if isinstance(m, Relation):
        return ("R", (m.relation_id, tuple(c.type_oid for c in m.columns)))
    if isinstance(m, Type):
        return ("Y", (m.type_oid, m.namespace, m.type_name))
    return None


def _reason(e, codec):
    """A failure's text, saying which encoding the text was not."""
    return f"{e}" + (f" (not {codec})" if isinstance(e, UnicodeError) else "")


def _text_kind(r):
    if r.conv in ("text", "enum"):   # an enum's send form is its label's text
        return "text"
    if r.conv == "jsonb":
        return "jsonb"
    if r.conv == "array":
        k = _text_kind(r.elem)
        return ("array", k) if k is not None else None
    return None


class Timeline:
    """The walk's state as of any point of an archive, from its state rows alone (Relation,
    Type, Stream Start/Stop: ~1% of it), for a walk that starts anywhere: a Spark
    partition, which may hold any rows of the archive, starts from :meth:`seed` at its
    first row's order key, and again wherever a state row of another partition falls
    between its rows. ``keys`` (rising) and ``events``: what each state row did,
    ``("S"|"E", None)``, ``("R", (relation_id, type OIDs))``, ``("Y", (oid, namespace,
    name))``; ``in_stream``: the state before the first."""

    def __init__(self, keys, events, in_stream, codec, envelope, registry=None):
        self.keys = [int(k) for k in keys]
        self.events = list(events)
        self.in_stream = bool(in_stream)
        self.codec, self.envelope, self.registry = codec, envelope, registry

    @classmethod
    def build(cls, payloads, keys, encoding, *, envelope="auto", in_stream=None, registry=None,
              errors="strict"):
        """From the archive's state rows (any others are ignored) and their order keys."""

        codec = python_codec(encoding)
        keys = np.asarray(pa.array(keys).to_numpy(zero_copy_only=False), dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        rows = [as_bytes(r) if r is not None else None for r in pa.array(payloads).take(pa.array(order)).to_pylist()]
        keys = keys[order]
        if in_stream is None:
            in_stream = infer_initial_state(rows, envelope, codec)
        walk = _Walk(codec, copy.deepcopy(registry), envelope, in_stream)
        ev_keys, events = [], []
        for k, raw in zip(keys, rows, strict=True):
            if raw is None or _tag(raw, envelope) not in _STATE:
                continue        # not a state row: nothing to decode (a data source gives every control row)
            try:
                m = decode_row(raw, envelope, walk.in_stream, codec)
            except (PgoutputDecodeError, UnicodeError, ValueError) as e:
                if errors == "strict":
                    raise TranscodeError(f"order key {k}: {_reason(e, codec)}", int(k), getattr(e, "offset", None),
                                         getattr(e, "message_type", None)) from None
                event = walk.after_failure(raw)
            else:
                event = _event_of(m.payload if isinstance(m, XLogData) else m)
                if event is not None:
                    walk.apply(event)
            if event is not None:
                ev_keys.append(k)
                events.append(event)
        return cls(ev_keys, events, in_stream, codec, envelope, registry)

    def for_keys(self, lo, hi):
        """The same timeline for the rows with keys in ``[lo, hi]`` only (a data source
        partition carries its own): the state before ``lo`` folded into its start (each
        relation's last Relation, every Type message, the stream state), then the events
        up to ``hi``."""
        w = self.seed(self.walk(), lo)
        start = [(-(1 << 63), ("R", (rid, types))) for rid, types in w.types.items()]
        upto = bisect.bisect_right(self.keys, hi)
        kept = list(zip(self.keys[w.applied:upto], self.events[w.applied:upto], strict=True))
        return Timeline([k for k, _ in start + kept], [e for _, e in start + kept], w.in_stream, self.codec,
                        self.envelope, w.registry)

    def walk(self):
        """A walk at the archive's start; :meth:`seed` moves it."""
        w = _Walk(self.codec, copy.deepcopy(self.registry), self.envelope, self.in_stream)
        w.applied = 0
        return w

    def seed(self, walk, key):
        """``walk`` (from :meth:`walk`) brought to its state just before order key ``key``:
        forward from where it is, or a new one when ``key`` lies behind it."""
        upto = bisect.bisect_left(self.keys, key)
        if upto < walk.applied:
            walk = self.walk()
        for event in self.events[walk.applied:upto]:
            walk.apply(event)
        walk.applied = upto
        return walk


class Transcoder:
    """One walk over an archive, fed in order, in as many calls as it has parts (files,
    batches): the state (stream block, relations' column types, Type messages) carries
    from one call to the next. :func:`transcode_payloads` is one call of a new one."""

    def __init__(self, encoding: str, *, envelope: str = "auto", in_stream=None,
                 registry: tc.TypeRegistry | None = None, errors: str = "strict", timeline: Timeline | None = None):
        if errors not in ("strict", "keep"):
            raise ValueError(f"errors must be 'strict' or 'keep', not {errors!r}")
        if envelope not in ("auto", "none", "xlogdata"):
            raise ValueError(f"envelope must be one of 'auto', 'none', 'xlogdata', not {envelope!r}")
        self.codec = python_codec(encoding)
        self.errors = errors
        self.timeline = timeline
        self._walk = timeline.walk() if timeline is not None else _Walk(self.codec, registry, envelope, in_stream)
        self.rows = 0          # rows seen by earlier calls: row numbers count the whole walk

    def seek(self, key):
        """With a ``timeline``: the walk's state just before order key ``key``, for rows
        that do not follow the ones given before (another part of the archive)."""
        self._walk = self.timeline.seed(self._walk, key)

    def keyed(self, values, keys):
        """With a ``timeline``: ``values`` (any rows of the archive, ``keys`` their order
        keys) rewritten, each by the state as of its own key. The rows are taken in key
        order, and the walk is seeded from the timeline at the first and again wherever
        a state row of the archive falls between them (it may be in other rows: another
        partition's). Returns the array in the rows' own order; a TranscodeError names
        the order key."""

        arr = _binary_array(values)
        keys = np.asarray(keys, dtype=np.int64)
        if len(arr) == 0:
            return arr
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        pay = arr.take(pa.array(order))
        events = np.asarray(self.timeline.keys, dtype=np.int64)
        inner = events[(events > sk[0]) & (events <= sk[-1])]
        bounds = [0, *np.unique(np.searchsorted(sk, inner, side="left")).tolist(), len(sk)]
        outs = []
        for a, b in zip(bounds, bounds[1:], strict=False):
            if a == b:
                continue
            self.seek(int(sk[a]))
            self.rows = 0
            try:
                out, _ = self.payloads(pay.slice(a, b - a))
            except TranscodeError as e:
                key = int(sk[a + e.row])
                raise TranscodeError(f"order key {key}: {e.reason}", key, e.offset, e.message_type,
                                     e.reason) from None
            outs.append(out.cast(arr.type) if out.type != arr.type else out)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return pa.concat_arrays(outs).take(pa.array(inverse))

    def payloads(self, values):
        """``(pa.BinaryArray, TranscodeReport)`` of the next rows of the archive."""
        walk = self._walk
        arr = _binary_array(values)
        if walk.in_stream is None:
            walk.in_stream = infer_initial_state(payload_values(arr), walk.envelope, self.codec)
        report = TranscodeReport(rows=len(arr))
        first = self.rows
        self.rows += len(arr)
        if self.codec == "utf-8":
            report.kept = len(arr)
            return arr, report

        def one(i, raw):
            try:
                return walk.payload(raw)
            except (PgoutputDecodeError, UnicodeError, ValueError) as e:
                reason = _reason(e, self.codec)
                why = f"archive row {first + i}: {reason}"
                if self.errors == "strict":
                    raise TranscodeError(why, first + i, getattr(e, "offset", None),
                                         getattr(e, "message_type", None), reason) from None
                report.left_as_sent.append((first + i, why))
                walk.after_failure(raw)
                return raw

        if _rewrite_batch is not None:
            out, report.rewritten = _rewrite_batch(arr, walk, one, _ENVELOPE_CODE[walk.envelope])
        else:
            rows = arr.to_pylist()
            new = [None if raw is None else one(i, raw) for i, raw in enumerate(rows)]
            report.rewritten = sum(a is not None and a != b for a, b in zip(new, rows, strict=True))
            out = pa.array(new, pa.binary())
        report.kept = report.rows - report.rewritten
        return out, report


def _binary_array(values):
    """``values`` (a binary/large binary array, chunked or not, or a list of bytes) as one
    array."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if not isinstance(values, pa.Array):
        values = pa.array([None if v is None else as_bytes(v) for v in values], pa.binary())
    if not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
        raise TypeError(f"payloads must be binary, not {values.type}")
    return values


def transcode_payloads(values, encoding: str, **options):
    """Rewrite a column of payloads captured under ``client_encoding = encoding`` as a
    UTF-8 session receives them. Returns ``(pa.BinaryArray, TranscodeReport)``, one row
    per row in, nulls kept.

    The payloads must be one session's messages in their arrival order (an archive, or a
    run of it that starts outside a stream block or says ``in_stream``), so the walk knows
    each relation's column types and the stream state. Options (:class:`Transcoder`):
    ``registry``, user types (enums) whose binary values are text, to which the archive's
    Type messages are added; ``envelope`` and ``in_stream`` as for ``decode_batch``;
    ``errors="strict"`` raises :class:`TranscodeError` naming the row, byte offset and
    message type of a payload that does not decode or whose text is not ``encoding``,
    ``errors="keep"`` leaves such a row as sent (the decoders then report it, in their
    own ``mode``) and lists it in the report.
    """
    return Transcoder(encoding, **options).payloads(values)


def transcode_archive(table: pa.Table, encoding: str, *, payload: str = "data", **options):
    """An archive table (``capture``'s Parquet, or any table with a binary payload column
    in arrival order) with its payloads rewritten by :func:`transcode_payloads`. The other
    columns are kept; the schema metadata records ``pgoutput_codec.transcoded_from``.
    Returns ``(table, TranscodeReport)``."""
    col = table.column(payload)
    new, report = transcode_payloads(col, encoding, **options)
    i = table.schema.get_field_index(payload)
    field_ = table.schema.field(i).with_type(new.type)
    out = table.set_column(i, field_, new)
    md = dict(table.schema.metadata or {})
    md[TRANSCODED_FROM] = pg_encoding_name(encoding).encode()
    return out.replace_schema_metadata(md), report
