"""The type catalog an archive carries: what decoding needs of every type its tables use.

A :class:`Catalog` is a list of versions, each the definitions of a set of types as the
server's catalog held them at an LSN (where capture took it). Its JSON form (a catalog
file, and the Parquet footer metadata of every captured file under :data:`CATALOG_KEY`)::

    {"format": 1,
     "versions": [{"lsn": "0/16B3748", "timezone": "UTC",
                   "types": [{"oid": 16390, "namespace": "public", "name": "mood",
                              "kind": "enum", "labels": ["sad", "ok", "happy"], ...}]}]}

One entry per type: ``oid``, ``namespace``, ``name``, ``kind`` (enum | domain | array |
composite | range | multirange | base), ``labels`` (an enum's, in sort order),
``attributes`` (a composite's live attributes in order, ``[name, type_oid, typmod]``
each), ``base_oid`` / ``base_typmod`` (a domain's base type, an array's element type, a
range's subtype, a multirange's range type), ``extension`` / ``extension_version`` (the
extension that owns the type). Built-in types are not recorded.

:meth:`Catalog.registry` makes the :class:`~.registry.TypeRegistry` every decoding path
takes: for each OID its newest definition, the different ones recorded before it in
``earlier``. :func:`catalog_from_connection` reads one version from a live server;
:func:`registry_of` gives the registry that change rows carrying a catalog in their Arrow
schema metadata are typed with.
"""

from __future__ import annotations

import copy
import json
import os
from typing import NamedTuple

from ..pgoutput.messages import format_lsn, parse_lsn
from .registry import TypeRegistry, UserType, arrow_places
from .serverdefs import KINDS, USER_TYPES, read_types, seed_sql, server_position, type_entry

__all__ = ["CATALOG_KEY", "FORMAT", "KINDS", "Catalog", "CatalogVersion", "read_catalog", "write_catalog",
           "catalog_from_connection", "catalog_of", "with_catalog", "registry_of", "user_types", "KINDS",
           "USER_TYPES"]

#: the key of the catalog (JSON) in a captured file's Parquet footer and in the Arrow
#: schema metadata of change rows decoded from an archive that has one
CATALOG_KEY = b"pgoutput_codec.catalog"
#: the version of the JSON layout
FORMAT = 1
class CatalogVersion(NamedTuple):
    """The definitions of the types recorded at ``lsn`` (an int), sorted by OID;
    ``timezone``: the server's ``TimeZone`` then (None: not known)."""

    lsn: int
    types: tuple
    timezone: str | None = None

    def to_dict(self) -> dict:
        d = {"lsn": format_lsn(self.lsn), "types": [dict(t) for t in self.types]}
        if self.timezone is not None:
            d["timezone"] = self.timezone
        return d

    def key(self):
        return (self.lsn, json.dumps(self.types, sort_keys=True), self.timezone)


def _version(lsn, types, timezone=None) -> CatalogVersion:
    entries = {}
    for t in types:
        e = type_entry(t)
        entries[e["oid"]] = e
    return CatalogVersion(int(lsn), tuple(entries[k] for k in sorted(entries)), timezone)


class Catalog:
    """Versions of the type catalog, in LSN order (equal versions once).

    ``versions``: :class:`CatalogVersion` objects, or ``(lsn, types[, timezone])``."""

    def __init__(self, versions=()):
        seen, out = set(), []
        for v in versions:
            v = v if isinstance(v, CatalogVersion) and all(isinstance(t, dict) for t in v.types) else _version(*v)
            k = v.key()
            if k not in seen:
                seen.add(k)
                out.append(v)
        out.sort(key=lambda v: v.lsn)          # (stable: equal LSNs keep their order)
        self.versions: list[CatalogVersion] = out
        self._built = None       # the registry of no caller's, built once (:meth:`shared_registry`)

    def __len__(self) -> int:
        return len(self.versions)

    def __eq__(self, other) -> bool:
        return isinstance(other, Catalog) and [v.key() for v in self.versions] == [v.key() for v in other.versions]

    def __repr__(self) -> str:
        return f"Catalog({len(self.versions)} version(s), {len(self.oids())} type(s))"

    @property
    def latest(self) -> CatalogVersion | None:
        return self.versions[-1] if self.versions else None

    def oids(self) -> set:
        """Every type OID any version records."""
        return {t["oid"] for v in self.versions for t in v.types}

    def with_version(self, lsn, types, timezone=None) -> "Catalog":
        """This catalog and one more version (``types``: entries as in the JSON)."""
        return Catalog([*self.versions, _version(lsn, types, timezone)])

    def merge(self, other: "Catalog | None") -> "Catalog":
        """The versions of both, equal ones once."""
        return Catalog(self.versions + (other.versions if other is not None else []))

    # ---------------------------------------------------------------- JSON
    def to_dict(self) -> dict:
        return {"format": FORMAT, "versions": [v.to_dict() for v in self.versions]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text) -> "Catalog":
        """The catalog of JSON ``text`` (str or bytes); ValueError saying what is wrong."""
        try:
            d = json.loads(text)
        except (TypeError, ValueError) as e:
            raise ValueError(f"not a type catalog: not JSON ({e})") from None
        return cls.from_dict(d)

    @classmethod
    def from_dict(cls, d) -> "Catalog":
        if not isinstance(d, dict) or "versions" not in d:
            raise ValueError("not a type catalog: no 'versions'")
        if d.get("format") != FORMAT:
            raise ValueError(f"type catalog format {d.get('format')!r}: this version reads format {FORMAT}")
        if not isinstance(d["versions"], list):
            raise ValueError("not a type catalog: 'versions' is not a list")
        versions = []
        for v in d["versions"]:
            if not isinstance(v, dict) or not isinstance(v.get("types"), list):
                raise ValueError("type catalog: a version without a list of 'types'")
            try:
                lsn = parse_lsn(v.get("lsn"))
            except (TypeError, ValueError):
                raise ValueError(f"type catalog: version lsn {v.get('lsn')!r} is not an LSN (X/Y)") from None
            tz = v.get("timezone")
            versions.append(_version(lsn, v["types"], None if tz is None else str(tz)))
        return cls(versions)

    # ---------------------------------------------------------------- registry
    def registry(self, over: TypeRegistry | None = None) -> TypeRegistry:
        """A :class:`TypeRegistry` of every type recorded: its newest definition in
        ``types[oid]`` (``lsn``: where that definition was first recorded), the different
        ones before it in ``earlier`` (oldest first). ``over``: a caller's registry, which
        wins OID by OID for every type it defines (an entry of kind 'unknown' defines
        nothing), and with its ``timezone`` when it has one. ``timezone``: the newest
        version's, when Arrow's database places it as the server did (not ``localtime``
        or a POSIX rule). A new registry each call."""
        return _over(self._build(), over)

    def _build(self) -> TypeRegistry:
        defs: dict = {}        # oid -> [(lsn, entry)], a new one only where it differs
        for v in self.versions:
            for t in v.types:
                seen = defs.setdefault(t["oid"], [])
                if not seen or seen[-1][1] != t:
                    seen.append((v.lsn, t))
        reg = TypeRegistry()
        for oid, seen in defs.items():
            newest = _user_type(*seen[-1])
            newest.earlier = tuple(_user_type(lsn, t) for lsn, t in seen[:-1])
            reg.types[oid] = newest
        # (a zone Arrow cannot place as the server did, such as 'localtime', is not guessed)
        zones = [v.timezone for v in self.versions if v.timezone is not None]
        reg.timezone = zones[-1] if zones and arrow_places(zones[-1]) else None
        return reg

    def shared_registry(self, over: TypeRegistry | None = None) -> TypeRegistry:
        """:meth:`registry`, its :class:`UserType` objects built once and shared by every
        registry it gives (a new ``types`` dict each time): what the table functions
        take, table after table. Do not change the types it holds."""
        if self._built is None:
            self._built = self._build()
        return _over(TypeRegistry(dict(self._built.types), self._built.timezone), over)


def _over(reg: TypeRegistry, over: TypeRegistry | None) -> TypeRegistry:
    """``reg`` with the types ``over`` defines (copies) and its time zone."""
    if over is not None:
        for oid, u in over.types.items():
            if u.kind != "unknown" or oid not in reg.types:
                reg.types[oid] = copy.deepcopy(u)
        if over.timezone is not None:
            reg.timezone = over.timezone
    return reg


def _user_type(lsn, t) -> UserType:
    return UserType.of_entry(t, lsn)


def user_types(entries) -> dict:
    """{oid: :class:`UserType`} of type entries (not from an archive: no ``lsn``)."""
    return {e["oid"]: UserType.of_entry(e) for e in map(type_entry, entries)}


def read_catalog(path) -> Catalog:
    """The catalog in file ``path`` (written by :func:`write_catalog` or
    ``pgoutput-codec catalog``); ValueError naming the file and what is wrong."""
    try:
        with open(os.fspath(path), "rb") as f:
            text = f.read()
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror or e}") from None
    try:
        return Catalog.from_json(text)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def write_catalog(path, catalog: Catalog) -> None:
    """Write ``catalog``'s JSON to ``path`` (whole: a temporary file renamed over it)."""
    path = os.fspath(path)
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(catalog.to_json())
    os.replace(tmp, path)


# ---------------------------------------------------------------------- change rows
_PARSED: dict = {}       # catalog JSON bytes -> Catalog (the few an archive has)


def catalog_of(table_or_schema) -> Catalog | None:
    """The catalog an Arrow table (or schema) carries in its metadata, or None."""
    schema = getattr(table_or_schema, "schema", table_or_schema)
    meta = getattr(schema, "metadata", None)
    raw = meta.get(CATALOG_KEY) if meta else None
    if raw is None:
        return None
    found = _PARSED.get(raw)
    if found is None:
        try:
            found = Catalog.from_json(raw)
        except ValueError as e:
            raise ValueError(f"the type catalog of these rows' schema metadata ({CATALOG_KEY.decode()}): {e}") \
                from None
        if len(_PARSED) > 64:
            _PARSED.clear()
        _PARSED[raw] = found
    return found


def with_catalog(table, catalog: Catalog | None):
    """``table`` (an Arrow table or schema) carrying ``catalog`` in its schema metadata
    (merged with one it carries already); ``table`` itself when there is none."""
    if catalog is None or not len(catalog):
        return table
    had = catalog_of(table)
    if had is not None:
        catalog = had.merge(catalog)
    schema = getattr(table, "schema", table)
    meta = dict(schema.metadata or {})
    meta[CATALOG_KEY] = catalog.to_json().encode()
    return table.replace_schema_metadata(meta) if hasattr(table, "replace_schema_metadata") \
        else schema.with_metadata(meta)


def registry_of(changes, registry: TypeRegistry | None = None) -> TypeRegistry | None:
    """The registry to type ``changes`` (Arrow change rows, or anything with a schema)
    with: the catalog their schema metadata carries under :data:`CATALOG_KEY`, under the
    caller's ``registry`` (which wins OID by OID, :meth:`Catalog.registry`); ``registry``
    itself when they carry none."""
    cat = catalog_of(changes) if changes is not None else None
    if cat is None:
        return registry
    return cat.shared_registry(over=registry)


def catalog_from_connection(conn, publication: str | None = None, *, oids=(), lsn=None) -> Catalog:
    """One version read from a live server over DB-API ``conn`` (psycopg's, say): every
    type the columns of the tables of ``publication`` (comma-separated names; None: of
    every user table) use, transitively (a domain's base type, an array's element, a
    composite's attribute types, a range's subtype and multirange, and the arrays of
    these), and the types ``oids``. Its LSN: ``lsn`` when given, else the server's WAL
    position as it is read."""
    types = read_types(conn, seed_sql(publication, oids))
    now, zone = server_position(conn)
    return Catalog([_version(now if lsn is None else lsn, types, zone)])
