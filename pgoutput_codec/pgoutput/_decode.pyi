# Stub of the compiled module _decode.pyx (the plain-Python twin is _decode_py.py).
from typing import Union

from typing_extensions import Buffer

from .messages import PgoutputMessage, PrimaryKeepalive, XLogData

def decode_message(
    data: Buffer, *, in_stream: bool | None = None
) -> Union[PgoutputMessage, XLogData, PrimaryKeepalive]: ...
