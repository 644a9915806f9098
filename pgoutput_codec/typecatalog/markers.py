"""What a value Arrow holds as null plus a marker stands for: :class:`Special`
(``infinity``, ``-infinity``, ``NaN``) and the names of the compiled converters' special
codes; and :class:`Physical`, a date or timestamp Python's datetime cannot hold."""

from __future__ import annotations

__all__ = ["Special", "Physical", "SPECIAL_NAMES", "NUMERIC_SPECIAL", "REFUSED"]


class Special(str):
    """What :func:`convert_value` returns for a value Arrow holds as null plus a marker:
    ``Special('infinity')``, ``Special('-infinity')``, ``Special('NaN')``."""

    def __repr__(self):
        return f"Special({str(self)!r})"


class Physical(int):
    """The Arrow storage value (days or µs since 1970-01-01) of a date/timestamp that
    Python's datetime cannot hold (BC, or after 9999)."""

    def __repr__(self):
        return f"Physical({int(self)})"


#: names of the special codes of ``_convert`` (code 0 = not special)
SPECIAL_NAMES = (None, "infinity", "-infinity", "NaN")

#: the start of the special of a value a converter refused (out of range, malformed):
#: the reason follows
REFUSED = "refused: "


#: numeric's special text forms -> the marker each is held as
NUMERIC_SPECIAL = {b"NaN": "NaN", b"Infinity": "infinity", b"-Infinity": "-infinity"}
