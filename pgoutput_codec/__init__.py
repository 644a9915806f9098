"""pgoutput_codec: decode archived PostgreSQL pgoutput (and openGauss) replication payloads.

Entry points:

- :func:`decode_message` / :func:`encode_message` — one payload to a message object and back;
- :func:`decode_batch` — a binary Arrow column of payloads to a ``StructArray`` (Cython hot path);
- :mod:`pgoutput_codec.spark` — the same as Spark column functions.

Setting ``PGOUTPUT_CODEC_NO_EXTENSIONS=1`` selects the plain-Python twin of the decoders
(the readable reference and differential-test oracle) instead of the compiled modules.
"""

from __future__ import annotations

import importlib

from .errors import (AmbiguousMessageError, ArchiveOrderError, PgoutputCodecError, PgoutputDecodeError,
                     PgoutputEncodeError)
from ._native import USING_EXTENSIONS
from .pgoutput.facts import CONTROL_TAGS, END_TAGS, ENVELOPE_TAGS, MESSAGE_CLASSES, PGOUTPUT_TAGS, STREAMABLE_TAGS
from .pgoutput.messages import *  # noqa: F401,F403
from .pgoutput.messages import __all__ as _messages_all

__version__ = "0.1.0"

# name -> (module, attribute); resolved on first use so `import pgoutput_codec` stays cheap
_LAZY = {
    "decode_message": (".pgoutput._decode" if USING_EXTENSIONS else ".pgoutput._decode_py", "decode_message"),
    "decode_batch": (".pgoutput.batch" if USING_EXTENSIONS else ".pgoutput._decode_py", "decode_batch"),
    "encode_message": (".pgoutput.encode", "encode_message"),
    "MESSAGE_STRUCT": (".schema", "MESSAGE_STRUCT"),
    "CHANGE_SCHEMA": (".schema", "CHANGE_SCHEMA"),
    "ChangeDecoder": (".changes.decoder", "ChangeDecoder"),
    "decode_changes": (".changes.parallel", "decode_changes"),
    "table_changes": (".tables", "table_changes"),
    "decode_table_changes": (".tables", "decode_table_changes"),
    "snapshot": (".tables", "snapshot"),
    "history": (".tables", "history"),
    "net_changes": (".tables", "net_changes"),
    "mirror": (".lake", "mirror"),
    "mirror_version_at": (".lake", "mirror_version_at"),
    "Checkpoint": (".changes.checkpoint", "Checkpoint"),
    "transcode_payloads": (".transcode", "transcode_payloads"),
    "transcode_archive": (".transcode", "transcode_archive"),
    "Transcoder": (".transcode", "Transcoder"),
    "sample_archive_path": (".data", "sample_archive_path"),
    "archive_catalog": (".archive", "archive_catalog"),
    "read_catalog": (".typecatalog.catalog", "read_catalog"),
    "write_catalog": (".typecatalog.catalog", "write_catalog"),
    "catalog_from_connection": (".typecatalog.catalog", "catalog_from_connection"),
}

# The first names resolve lazily through __getattr__ below.
__all__ = [  # noqa: F405
    "decode_message", "decode_batch", "encode_message", "MESSAGE_STRUCT", "CHANGE_SCHEMA",
    "ChangeDecoder", "decode_changes", "table_changes", "decode_table_changes", "snapshot", "history",
    "net_changes", "mirror", "mirror_version_at", "Checkpoint", "transcode_payloads", "transcode_archive", "Transcoder", "sample_archive_path",
    "archive_catalog", "read_catalog", "write_catalog", "catalog_from_connection",
    "PgoutputCodecError", "PgoutputDecodeError", "AmbiguousMessageError",
    "ArchiveOrderError", "PgoutputEncodeError",
    "USING_EXTENSIONS", *_messages_all,
    "MESSAGE_CLASSES", "PGOUTPUT_TAGS", "ENVELOPE_TAGS", "STREAMABLE_TAGS", "CONTROL_TAGS", "END_TAGS",
]


def __getattr__(name):
    try:
        mod, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'pgoutput_codec' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(mod, __name__), attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
