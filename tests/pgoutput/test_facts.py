"""The table of message facts (pgoutput/facts.py) is what every reader of a tag reads: the
compiled declarations written from it, the plain-Python parser's dispatch, and the order
of the parse functions in the compiled parser and its twin."""

import re
from pathlib import Path

import pgoutput_codec
from pgoutput_codec.pgoutput import _parse_py, facts
from pgoutput_codec.changes import tags

PKG = Path(pgoutput_codec.__file__).parent / "pgoutput"


def test_compiled_declarations_are_written_from_the_table():
    text = (PKG / "_facts.pxd").read_text()
    assert text == facts.cython_declarations(), (
        "_facts.pxd differs from facts.py: run "
        "python -c 'from pgoutput_codec.pgoutput import facts; facts.write_declarations()' and rebuild")


def test_every_message_has_one_row_and_its_class_names_its_tag():
    assert len(facts.MESSAGES) == 19 and len(facts.FACTS) == 21
    for tag, f in facts.FACTS.items():
        assert f.cls.type == tag and facts.MESSAGE_CLASSES[tag] is f.cls
    assert facts.FACTS["I"].fields == ("xid", "relation_id", "new_tuple")


def test_the_tag_sets():
    assert facts.PGOUTPUT_TAGS == "BCORYIUDTMSEcAbPKrp"
    assert facts.ENVELOPE_TAGS == "wk"
    assert facts.STREAMABLE_TAGS == "RYIUDTM"
    assert facts.CONTROL_TAGS == "BCORYSEcAbPKrp"
    assert set(facts.END_TAGS) == set("CPKrcpA")
    assert facts.CHANGE_TAGS == "IUDT" and facts.ROW_CHANGE_TAGS == "IUD"
    assert facts.FEATURE_TAGS == {"streaming": "SEcAp", "two-phase": "bPKrp"}
    assert tags.INERT_TAGS == b"M" and tags.ENVELOPE_INERT_TAGS == b"k"
    assert pgoutput_codec.CONTROL_TAGS == facts.CONTROL_TAGS


def test_the_twin_dispatches_by_the_table():
    assert [chr(t) for t in _parse_py._READERS] == list(facts.PGOUTPUT_TAGS)
    for f in facts.MESSAGES:
        name, _reader, streamable = _parse_py._READERS[ord(f.tag)]
        assert (name, streamable) == (f.name, f.streamable)


def _snake(name):
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).lower()


def test_one_parse_function_per_message_in_the_twins_order():
    """``_parse.pyx`` has one function per message, named and ordered as the twin's."""
    compiled = re.findall(r"^cdef (?:inline )?int _(\w+)\(Reader\* r, Parsed\* m, Scratch\* s\) noexcept nogil:",
                          (PKG / "_parse.pyx").read_text(), re.M)
    twin = [fn.__name__.lstrip("_") for fn in (_parse_py._READERS[ord(f.tag)][1] for f in facts.MESSAGES)]
    assert compiled == twin
    want = [_snake(f.name) for f in facts.MESSAGES]
    assert twin == [w.replace("logical_message", "message") for w in want]


def test_the_encoder_dispatches_by_the_table():
    from pgoutput_codec.pgoutput import encode

    assert list(encode._ENCODERS) == [f.cls for f in facts.FACTS.values()]


def test_the_message_struct_has_a_column_for_every_field():
    """Each field of each message is a column of ``MESSAGE_STRUCT`` by the same name (an
    XLogData's payload is the message in its row)."""
    from pgoutput_codec.schema import MESSAGE_FIELDS

    names = {f.name for f in MESSAGE_FIELDS}
    for f in facts.FACTS.values():
        assert set(f.fields) - {"payload"} <= names, f.name
