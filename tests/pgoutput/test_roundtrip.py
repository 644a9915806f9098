"""Hypothesis round trips for every message type, on both decoders, and a differential
test: mutated encodings give the same result (or the same error) on both."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategies as S
from pgoutput_codec import PgoutputDecodeError
from pgoutput_codec.pgoutput.encode import encode_message

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("tag", sorted(S.ALL))
@SETTINGS
@given(data=st.data())
def test_decode_encode_roundtrip(impl, tag, data):
    msg = data.draw(S.ALL[tag])
    raw = encode_message(msg)
    got = impl.decode_message(raw, in_stream=S.stream_hint(msg))
    assert got == msg
    assert encode_message(got) == raw


@SETTINGS
@given(msg=S.any_message)
def test_roundtrip_without_stream_hint(impl, msg):
    """With ``in_stream=None`` the decoder returns one reading that re-encodes to the
    same bytes (the other reading may be the one picked), or reports the ambiguity."""
    raw = encode_message(msg)
    try:
        got = impl.decode_message(raw)
    except PgoutputDecodeError as e:
        assert type(e).__name__ == "AmbiguousMessageError", e
        return
    assert encode_message(got) == raw
    if S.stream_hint(msg) is None:
        assert got == msg


_TAGS = st.sampled_from(list(b"BCORYIUDTMSEcAbPKrpwk"))


@settings(max_examples=300, deadline=None)
@given(tag=_TAGS, body=st.binary(max_size=60), in_stream=st.sampled_from([None, True, False]))
def test_encode_decoded_random_bytes(impl, tag, body, in_stream):
    raw = bytes([tag]) + body
    try:
        msg = impl.decode_message(raw, in_stream=in_stream)
    except PgoutputDecodeError:
        return
    assert encode_message(msg) == raw


def outcome(decode, raw, in_stream):
    """The comparable result of one decode: the message, or (error type, offset, type)."""
    try:
        return ("ok", decode(raw, in_stream=in_stream))
    except PgoutputDecodeError as e:
        assert isinstance(e.offset, int) and 0 <= e.offset <= len(raw), (e.offset, raw.hex())
        return (type(e).__name__, e.offset, e.message_type)


@st.composite
def mutated(draw):
    raw = bytearray(encode_message(draw(S.any_message)))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["truncate", "set", "insert", "delete", "append"]))
        i = draw(st.integers(0, len(raw)))
        if op == "truncate":
            del raw[i:]
        elif op == "set" and i < len(raw):
            raw[i] = draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, ord("N"), ord("K"), ord("O"), ord("t"),
                                            ord("n"), 0xC3, 0xED])) if draw(st.booleans()) else draw(S.u8)
        elif op == "insert":
            raw[i:i] = draw(st.binary(min_size=1, max_size=5))
        elif op == "delete":
            del raw[i:i + draw(st.integers(1, 5))]
        else:
            raw += draw(st.binary(min_size=1, max_size=5))
    return bytes(raw)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=mutated(), in_stream=st.sampled_from([None, True, False]))
def test_differential_mutated(compiled_impl, python_impl, raw, in_stream):
    want = outcome(python_impl.decode_message, raw, in_stream)
    got = outcome(compiled_impl.decode_message, raw, in_stream)
    assert got == want, raw.hex()


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=40), in_stream=st.sampled_from([None, True, False]))
def test_differential_random_bytes(compiled_impl, python_impl, raw, in_stream):
    assert outcome(compiled_impl.decode_message, raw, in_stream) == outcome(
        python_impl.decode_message, raw, in_stream), raw.hex()
