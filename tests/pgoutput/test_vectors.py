"""Hand-written hex vectors (tests/vectors.py): decode gives the object, encode gives the bytes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pgoutput_codec import AmbiguousMessageError
from pgoutput_codec.pgoutput.encode import encode_message
from pgoutput_codec.pgoutput.facts import MESSAGE_CLASSES, PGOUTPUT_TAGS, STREAMABLE_TAGS
from pgoutput_codec.pgoutput.messages import XLogData

from vectors import BY_NAME, UNAMBIGUOUS, VECTORS

IDS = [v.name for v in VECTORS]


@pytest.mark.parametrize("vec", VECTORS, ids=IDS)
def test_decode_vector(impl, vec):
    assert impl.decode_message(vec.data, in_stream=vec.in_stream) == vec.message


@pytest.mark.parametrize("vec", VECTORS, ids=IDS)
def test_decode_vector_from_buffer_types(impl, vec):
    assert impl.decode_message(bytearray(vec.data), in_stream=vec.in_stream) == vec.message
    assert impl.decode_message(memoryview(vec.data), in_stream=vec.in_stream) == vec.message


@pytest.mark.parametrize("vec", VECTORS, ids=IDS)
def test_encode_vector(vec):
    assert encode_message(vec.message).hex() == vec.data.hex()


@pytest.mark.parametrize("vec", VECTORS, ids=IDS)
def test_decode_vector_without_stream_hint(impl, vec):
    """``in_stream=None`` finds the reading that consumes the payload, or says it cannot."""
    try:
        got = impl.decode_message(vec.data)
    except AmbiguousMessageError as e:
        inner = vec.message.payload if isinstance(vec.message, XLogData) else vec.message
        assert inner.type in STREAMABLE_TAGS
        assert e.offset == (25 if isinstance(vec.message, XLogData) else 0)
        assert e.message_type == inner.type
        assert vec.name not in UNAMBIGUOUS
    else:
        assert got == vec.message


@pytest.mark.parametrize("name", UNAMBIGUOUS)
def test_unambiguous_vectors_decode_without_hint(impl, name):
    vec = BY_NAME[name]
    assert impl.decode_message(vec.data) == vec.message


def test_ambiguous_relation(impl):
    # A Relation read with an xid it does not have stays well-formed: the 4 bytes
    # shift into the namespace ("publ" + "ic"), so without a hint it is ambiguous.
    vec = BY_NAME["relation"]
    with pytest.raises(AmbiguousMessageError) as ei:
        impl.decode_message(vec.data)
    assert ei.value.offset == 0 and ei.value.message_type == "R"
    streamed = impl.decode_message(vec.data, in_stream=True)
    assert streamed.namespace == "ic" and streamed.xid == 0x4000
    assert ei.value.readings == (vec.message, streamed)


@pytest.mark.parametrize("vec", VECTORS, ids=IDS)
def test_decoded_values_types(impl, vec):
    msg = impl.decode_message(vec.data, in_stream=vec.in_stream)
    assert type(msg) is type(vec.message)
    inner = msg.payload if isinstance(msg, XLogData) else msg
    for name in inner.__slots__:
        value = getattr(inner, name)
        if name in ("first_segment", "reply_requested"):
            assert type(value) is bool
        elif name in ("new_tuple", "old_tuple", "columns", "relation_ids") and value is not None:
            assert type(value) is tuple
        elif isinstance(value, int):
            assert type(value) is int, name


def test_every_message_type_has_a_vector():
    tags = set()
    for v in VECTORS:
        tags.add(v.message.type)
        if isinstance(v.message, XLogData):
            tags.add(v.message.payload.type)
    assert tags == set(MESSAGE_CLASSES)
    for tag in STREAMABLE_TAGS:
        streamed = [v for v in VECTORS if v.message.type == tag and v.in_stream]
        plain = [v for v in VECTORS if v.message.type == tag and v.in_stream is False]
        assert streamed and plain, tag
    assert len(PGOUTPUT_TAGS) == 19


@pytest.mark.skipif(not os.environ.get("CI"), reason="only CI must run the compiled decoder")
def test_compiled_module_loaded_in_ci():
    import pgoutput_codec
    import pgoutput_codec.pgoutput._decode
    import pgoutput_codec.pgoutput.batch

    assert pgoutput_codec.USING_EXTENSIONS is True
    assert pgoutput_codec.decode_message is pgoutput_codec.pgoutput._decode.decode_message
    assert pgoutput_codec.decode_batch is pgoutput_codec.pgoutput.batch.decode_batch
    assert pgoutput_codec.pgoutput._decode.__file__.endswith((".so", ".pyd"))
    from pgoutput_codec.opengauss import _shapes, rows
    assert rows.tuple_shapes is _shapes.tuple_shapes


def test_no_extensions_switch_selects_the_twin():
    code = ("import pgoutput_codec as p, pgoutput_codec.pgoutput._decode_py as t; "
            "assert not p.USING_EXTENSIONS; "
            "assert p.decode_message is t.decode_message and p.decode_batch is t.decode_batch; "
            "from pgoutput_codec.opengauss import rows; assert rows.tuple_shapes is rows._shapes")
    env = dict(os.environ, PGOUTPUT_CODEC_NO_EXTENSIONS="1")
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
