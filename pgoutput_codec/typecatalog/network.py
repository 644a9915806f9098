"""Network addresses, kept as the server prints them: inet and cidr (``inet_out``, which
prints IPv6 as ``pg_inet_net_ntop`` does), macaddr and macaddr8 (``macaddr_out``)."""

from __future__ import annotations

import ipaddress
import struct

from .typeinfo import Converter, TypeInfo

__all__ = ["CONVERTERS", "TYPES"]


def _t_inet(s, tm):
    t = s.decode("ascii")
    ipaddress.ip_interface(t) if "/" in t else ipaddress.ip_address(t)
    return t


def _ipv6_text(addr):
    words = struct.unpack(">8H", addr)
    # pg_inet_net_ntop (inet_net_ntop.c): longest run of >= 2 zero words (first wins),
    # dotted IPv4 tail for ::a.b.c.d and ::ffff:a.b.c.d
    best, cur = (-1, 0), (-1, 0)
    for i, w in enumerate(words):
        if w == 0:
            cur = (i if cur[0] < 0 else cur[0], cur[1] + 1)
            if cur[1] > best[1]:
                best = cur
        else:
            cur = (-1, 0)
    if best[1] < 2:
        best = (-1, 0)
    parts, i = [], 0
    while i < 8:
        if i == best[0]:
            parts.append("" if i else ":")
            i += best[1]
            if i == 8:
                parts.append("")
            continue
        if i == 6 and best[0] == 0 and (best[1] == 6 or (best[1] == 5 and words[5] == 0xFFFF)):
            parts.append(".".join(str(x) for x in addr[12:]))
            break
        parts.append(f"{words[i]:x}")
        i += 1
    return ":".join(parts)


def _b_inet(b, tm):
    if len(b) < 4:
        raise ValueError("inet send form shorter than its header")
    family, bits, is_cidr, n = b[0], b[1], b[2], b[3]
    addr = b[4:]
    if (family, n) not in ((2, 4), (3, 16)) or len(addr) != n or bits > 8 * n or is_cidr > 1:
        raise ValueError("bad inet send form")
    text = ".".join(str(x) for x in addr) if family == 2 else _ipv6_text(addr)
    if is_cidr or bits != 8 * n:
        text += f"/{bits}"
    return text


def _b_macaddr(b, tm):
    if len(b) not in (6, 8):
        raise ValueError("macaddr send form must be 6 or 8 bytes")
    return ":".join(f"{x:02x}" for x in b)


CONVERTERS = [
    Converter("inet", _t_inet, _b_inet),
    Converter("macaddr", None, _b_macaddr),
]

TYPES = [
    TypeInfo(650, "cidr", 651, "inet"),
    TypeInfo(774, "macaddr8", 775, "macaddr"),
    TypeInfo(829, "macaddr", 1040, "macaddr"),
    TypeInfo(869, "inet", 1041, "inet"),
]
