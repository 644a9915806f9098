"""What a family module of the catalog declares: :class:`TypeInfo` (a built-in type) and
:class:`Converter` (how the values of a converter name are read and typed), the code of a
family's compiled converter (:func:`fast_code`), and the readers of values no converter
reads (unknown types)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from .._native import USING_EXTENSIONS

if USING_EXTENSIONS:   # PGOUTPUT_CODEC_NO_EXTENSIONS: no compiled converters, every code 0
    from ._convert import CODES as _CODES

__all__ = ["TypeInfo", "ExtensionType", "Converter", "MAXDIM", "fast_code", "need", "unpacker", "text_as_str",
           "binary_as_bytes"]

#: the most dimensions a PostgreSQL array has (its MAXDIM): a value nested deeper is
#: refused and no type is nested deeper (Arrow's nested types recurse per level)
MAXDIM = 6


@dataclass(frozen=True)
class TypeInfo:
    """A built-in type: OID, name, array type OID, the name of its :class:`Converter`,
    the code of its compiled converter (0: the Python parsers only) and ``mods``, the
    typmod ``format_type``'s modifiers (``numeric(10,2)``'s ``[10, 2]``) stand for (None:
    the type takes none)."""

    oid: int
    name: str
    array_oid: int | None
    conv: str
    fast: int = 0
    mods: Callable[[list], int] | None = None


@dataclass(frozen=True)
class ExtensionType:
    """A type an extension owns, known by the extension's name and the type's (its OID
    is the database's own): the name of its :class:`Converter` and its compiled code."""

    extension: str
    name: str
    conv: str
    fast: int = 0


def _string(tm):
    return pa.string()


@dataclass(frozen=True)
class Converter:
    """How the values of converter ``name`` are read: ``text`` and ``binary`` parse the
    text form (``*_out`` under DateStyle ISO) and the send form (``*_send``), each given
    the bytes and the typmod and giving the value in Arrow-ready form, a
    :class:`~.errors.Special`, or raising ValueError (None: kept as text, or as bytes);
    ``arrow`` gives the Arrow type of a typmod; ``fast_args`` the (precision, scale) the
    compiled converter takes for a typmod, None where it cannot hold that typmod;
    ``delimiter``: what separates its elements in an array's text form (the type's
    ``typdelim``: PostGIS's geometry has ``:``)."""

    name: str
    text: Callable | None
    binary: Callable | None
    arrow: Callable = _string
    fast_args: Callable = lambda tm: (0, 0)
    delimiter: bytes = b","


def fast_code(name: str) -> int:
    """The code the compiled converter of family ``name`` registered (``_codecs/*.pxi``),
    0 without the compiled module."""
    return _CODES[name] if USING_EXTENSIONS else 0


def text_as_str(s, tm):
    """The text form as it is (types the catalog keeps as text, unknown types)."""
    return s.decode("utf-8")


def binary_as_bytes(b, tm):
    """The send form as it is (unknown types)."""
    return bytes(b)


def need(b, n):
    """Refuse a send form that is not ``n`` bytes long."""
    if len(b) != n:
        raise ValueError(f"send form must be {n} bytes, got {len(b)}")


def unpacker(fmt):
    """The parser of a send form that is one fixed-size field (``struct`` format ``fmt``)."""
    st = struct.Struct(fmt)

    def conv(b, tm):
        need(b, st.size)
        return st.unpack(b)[0]
    return conv
