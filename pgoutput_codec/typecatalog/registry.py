"""User types, how any type OID resolves, and its Arrow type.

:class:`TypeRegistry` holds the enums, domains, user arrays and names learned from Type
('Y') messages or from the server catalog; :func:`resolve` follows an OID through the
built-in table (:mod:`.facts`) and the registry to the converter that reads it;
:func:`arrow_type` gives the Arrow type of a column."""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from .composites import union_attributes
from .enums import ENUM_ARROW
from .errors import ConversionError
from .serverdefs import USER_TYPES, read_types
from .facts import ARRAY_BY_NAME, ARRAY_ELEM, ARRAY_NAME, BY_EXTENSION, BY_NAME, BY_OID, CONVERTERS, MAXDIM
from .ranges import MULTIRANGE_OF, SUBTYPE, range_arrow

__all__ = ["UserType", "TypeRegistry", "Resolved", "resolve", "with_type_names", "arrow_type", "arrow_of"]

@dataclass
class UserType:
    """What decoding needs of one type the built-in table does not hold.

    ``kind``: 'enum' | 'domain' | 'array' | 'composite' | 'range' | 'multirange' | 'base'
    (a base type, typically an extension's) | 'unknown' (text / send bytes).
    ``base_oid``: a domain's base type, an array's element type, a range's subtype, a
    multirange's range type. ``labels``: an enum's labels in sort order. ``attributes``:
    a composite's live attributes in order, ``(name, type_oid, typmod)`` each.
    ``extension`` / ``extension_version``: the extension that owns the type (base types are
    read by their extension's name and the type's name, their OIDs differ per database).
    ``lsn``: where an archive's catalog recorded this definition (None: not from an
    archive); ``earlier``: the definitions the same OID had before it in the archive,
    oldest first (values sent under them are read with them)."""

    oid: int
    namespace: str | None = None
    name: str | None = None
    kind: str = "unknown"
    base_oid: int | None = None
    base_typmod: int = -1
    labels: tuple = ()
    attributes: tuple = ()
    extension: str | None = None
    extension_version: str | None = None
    lsn: int | None = None
    earlier: tuple = ()

    @classmethod
    def of_entry(cls, t: dict, lsn: int | None = None) -> "UserType":
        """The type of a catalog entry (:func:`.serverdefs.type_entry`'s form)."""
        return cls(t["oid"], t["namespace"], t["name"], t["kind"], t["base_oid"], t["base_typmod"],
                   tuple(t["labels"]), tuple(tuple(a) for a in t["attributes"]), t["extension"],
                   t["extension_version"], lsn)


@dataclass
class TypeRegistry:
    """User types (OID >= 16384 or anything not in :data:`.facts.TYPES`).

    A Type ('Y') message only gives OID, namespace and name, which is not enough to
    know an enum from a domain: register those explicitly (:meth:`register_enum`,
    :meth:`register_domain`, :meth:`register_array`) or load them all from the server
    catalog (:meth:`load_from_connection`). Unregistered types convert as unknown.

    ``timezone`` is the server's ``TimeZone`` (an IANA name such as ``Europe/Berlin``;
    :meth:`load_from_connection` reads the session's): what an ``ALTER COLUMN … TYPE``
    between ``timestamp``, ``date`` and ``timestamptz`` read the values in, where the
    archive holds them as sent before it (:mod:`pgoutput_codec.typecatalog.casts`). None: UTC.
    """

    types: dict = field(default_factory=dict)
    timezone: str | None = None

    def _get(self, oid):
        return self.types.setdefault(oid, UserType(oid))

    def add_type_message(self, type_oid, namespace=None, type_name=None):
        """Record a Type ('Y') message (or any object with those attributes).

        pgoutput (``logicalrep_write_typ``) sends the OID of the column type but the
        namespace and name of its *base* type: a domain over numeric arrives as
        (domain OID, "pg_catalog", "numeric"). Such a message registers a domain over
        that builtin (its typmod is not sent: -1). A name '_x' where 'x' is a known
        user type of the same namespace registers an array of it. Facts already known
        (from the catalog or ``register_*``) are kept."""
        if not isinstance(type_oid, int):
            msg = type_oid
            type_oid, namespace, type_name = msg.type_oid, msg.namespace, msg.type_name
        t = self._get(type_oid)
        if t.kind == "unknown":
            if namespace in ("", "pg_catalog") and type_name in BY_NAME and BY_NAME[type_name].oid != type_oid:
                t.kind, t.base_oid, t.base_typmod = "domain", BY_NAME[type_name].oid, -1
            elif namespace in ("", "pg_catalog") and type_name in ARRAY_BY_NAME:
                t.kind, t.base_oid = "array", ARRAY_BY_NAME[type_name]
            elif type_name and type_name.startswith("_"):
                for u in self.types.values():
                    if u.name == type_name[1:] and u.namespace == namespace and u.oid != type_oid:
                        t.kind, t.base_oid = "array", u.oid
                        break
        t.namespace = namespace if t.namespace is None else t.namespace
        t.name = type_name if t.name is None else t.name
        return t

    def register_enum(self, oid, labels=(), name=None, array_oid=None):
        t = self._get(oid)
        t.kind, t.labels = "enum", tuple(labels)
        t.name = name or t.name
        if array_oid:
            self.register_array(array_oid, oid)
        return t

    def register_domain(self, oid, base_oid, base_typmod=-1, name=None, array_oid=None):
        t = self._get(oid)
        t.kind, t.base_oid, t.base_typmod = "domain", base_oid, base_typmod
        t.name = name or t.name
        if array_oid:
            self.register_array(array_oid, oid)
        return t

    def register_array(self, array_oid, elem_oid):
        t = self._get(array_oid)
        t.kind, t.base_oid = "array", elem_oid
        return t

    def register_composite(self, oid, attributes, name=None, array_oid=None):
        """``attributes``: ``(name, type_oid, typmod)`` per live attribute, in order."""
        t = self._get(oid)
        t.kind, t.attributes = "composite", tuple((str(n), int(o), int(m)) for n, o, m in attributes)
        t.name = name or t.name
        if array_oid:
            self.register_array(array_oid, oid)
        return t

    def register_range(self, oid, subtype_oid, name=None, array_oid=None, multirange_oid=None,
                       multirange_array_oid=None):
        t = self._get(oid)
        t.kind, t.base_oid = "range", subtype_oid
        t.name = name or t.name
        if array_oid:
            self.register_array(array_oid, oid)
        if multirange_oid:
            self.register_multirange(multirange_oid, oid, array_oid=multirange_array_oid)
        return t

    def register_multirange(self, oid, range_oid, name=None, array_oid=None):
        t = self._get(oid)
        t.kind, t.base_oid = "multirange", range_oid
        t.name = name or t.name
        if array_oid:
            self.register_array(array_oid, oid)
        return t

    def register_base(self, oid, name, namespace=None, extension=None, extension_version=None, array_oid=None):
        """A base type not built in, read by ``(extension, name)`` where an extension family
        declares it (:data:`.facts.BY_EXTENSION`), else as unknown."""
        t = self._get(oid)
        t.kind, t.name = "base", name
        t.namespace = namespace or t.namespace
        t.extension, t.extension_version = extension, extension_version
        if array_oid:
            self.register_array(array_oid, oid)
        return t

    _CATALOG_SQL = (
        "SELECT t.oid::int8, n.nspname, t.typname, t.typtype::text, t.typbasetype::int8, t.typtypmod,"
        " t.typelem::int8, t.typcategory::text FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
        " WHERE t.oid >= 16384 OR t.typtype IN ('e', 'd')"
    )

    def load_rows(self, rows):
        """Rows of ``_CATALOG_SQL``: (oid, nspname, typname, typtype, typbasetype,
        typtypmod, typelem, typcategory)."""
        for oid, nsp, name, typtype, base, typmod, elem, cat in rows:
            if typtype == "e":
                self.register_enum(oid, name=name)
            elif typtype == "d":
                self.register_domain(oid, base, typmod, name=name)
            elif cat == "A" and elem:
                self.register_array(oid, elem)
            else:
                self._get(oid).name = name
            self.types[oid].namespace = nsp
        return self

    def load_from_connection(self, conn):
        """Read every type not built in from a DB-API connection, as an archive's catalog
        records them (:func:`~.catalog.catalog_from_connection`: enum labels, composite
        attributes, domain bases, range subtypes, arrays, owning extensions), and its
        session's ``TimeZone`` (kept where one was given)."""
        self.types.update((e["oid"], UserType.of_entry(e)) for e in read_types(conn, USER_TYPES))
        if self.timezone is None:
            cur = conn.cursor()
            cur.execute("SHOW TimeZone")
            zone = cur.fetchone()[0]
            zone = zone.decode() if isinstance(zone, bytes) else zone
            if arrow_places(zone):
                self.timezone = zone
            else:   # a POSIX rule ('UTC+3'), or the server machine's own 'localtime'
                warnings.warn(f"the session's TimeZone {zone!r} is not a zone Arrow's database places: values "
                              "retyped between timestamp and timestamptz are read in UTC unless "
                              "TypeRegistry.timezone names the zone", stacklevel=2)
        return self


def with_type_names(registry, column_lists):
    """``registry`` taught what the stream's Type messages said of the types of the columns
    in ``column_lists`` (change rows' columns carry it: ``type_namespace``/``type_name``),
    as :meth:`TypeRegistry.add_type_message` learns it: a domain over a built-in type then
    reads as that type with no catalog at hand. A copy (the one given is left as it is);
    ``registry`` itself when no column has a name."""
    named = [(c["type_oid"], c.get("type_namespace"), c["type_name"])
             for cols in column_lists for c in cols or () if c.get("type_name") is not None]
    if not named:
        return registry
    reg = copy.deepcopy(registry) if registry is not None else TypeRegistry()
    for oid, namespace, name in named:
        reg.add_type_message(oid, namespace, name)
    return reg


def arrow_places(zone: str) -> bool:
    """Whether Arrow's time zone database knows ``zone`` as the server did: not
    ``localtime``, which is the machine's own (this one's, for Arrow)."""
    if zone.lower() == "localtime":
        return False
    try:
        pc.assume_timezone(pa.array([0], pa.timestamp("us")), zone)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


class Resolved(NamedTuple):
    """A type as its converters see it: a domain is its base type. ``elem``: the Resolved
    of an array's element, a range's subtype, a multirange's range; ``fields``: a
    composite's ``(name, Resolved)`` per attribute; ``user``: the :class:`UserType` read
    (an enum's labels, earlier definitions), None for built-in types."""

    oid: int
    name: str
    conv: str          # converter name; 'array', 'enum', 'composite', 'range', 'multirange' for those
    typmod: int
    fast: int
    elem: Any = None
    fields: tuple = ()
    user: Any = None


def resolve(oid, typmod=-1, registry=None, depth=0):
    """The :class:`Resolved` of type ``oid`` (with ``typmod``), through ``registry``."""
    if depth > 32:
        raise ConversionError(f"type OID {oid}: domain/array chain too deep")
    info = BY_OID.get(oid)
    if info is not None:
        elem = None
        if info.conv in ("range", "multirange"):
            elem = resolve(SUBTYPE[oid] if info.conv == "range" else MULTIRANGE_OF[oid], -1, registry, depth + 1)
        return Resolved(oid, info.name, info.conv, typmod, info.fast, elem)
    if oid in ARRAY_ELEM:
        return Resolved(oid, ARRAY_NAME[oid], "array", typmod, 0, resolve(ARRAY_ELEM[oid], typmod, registry, depth + 1))
    u = registry.types.get(oid) if registry is not None else None
    if u is None:
        return Resolved(oid, f"oid {oid}", "unknown", typmod, 0)
    name = u.name or f"oid {oid}"
    if u.kind == "enum":
        return Resolved(oid, name, "enum", typmod, 0, user=u)
    if u.kind == "domain":
        return resolve(u.base_oid, u.base_typmod if typmod == -1 else typmod, registry, depth + 1)
    if u.kind == "array":
        elem = resolve(u.base_oid, typmod, registry, depth + 1)
        return Resolved(oid, "_" + elem.name, "array", typmod, 0, elem)
    if u.kind == "composite":   # the union of its definitions (composites.py)
        fields = tuple((n, resolve(o, m, registry, depth + 1)) for n, o, m in union_attributes(u))
        return Resolved(oid, name, "composite", typmod, 0, fields=fields, user=u)
    if u.kind in ("range", "multirange"):
        return Resolved(oid, name, u.kind, typmod, 0, resolve(u.base_oid, -1, registry, depth + 1), user=u)
    ext = BY_EXTENSION.get((u.extension, u.name)) if u.kind == "base" else None
    if ext is not None:
        return Resolved(oid, name, ext.conv, typmod, ext.fast, user=u)
    return Resolved(oid, name, "unknown", typmod, 0, user=u)


def arrow_of(r, binary, ndim=1):
    """The Arrow type of a :class:`Resolved` type (see :func:`arrow_type`)."""
    if r.conv == "array":
        if ndim > MAXDIM:
            raise ValueError(f"ndim={ndim}: PostgreSQL arrays have at most {MAXDIM} dimensions")
        t = arrow_of(r.elem, binary)
        for _ in range(max(ndim, 1)):
            t = pa.list_(t)
        return t
    if r.conv == "enum":
        return ENUM_ARROW
    if r.conv == "composite":
        return pa.struct([pa.field(n, arrow_of(f, binary)) for n, f in r.fields])
    if r.conv == "range":
        return range_arrow(arrow_of(r.elem, binary))
    if r.conv == "multirange":
        return pa.list_(arrow_of(r.elem, binary))
    if r.conv == "unknown" or r.conv not in CONVERTERS:   # types no family reads yet: as unknown
        return pa.binary() if binary else pa.string()
    return CONVERTERS[r.conv].arrow(r.typmod)


def arrow_type(type_oid: int, type_modifier: int = -1, registry: TypeRegistry | None = None, *,
               binary: bool = False, ndim: int = 1) -> pa.DataType:
    """The Arrow type of a column. ``binary`` matters only for unknown types (string of
    the text form, or binary of the send form); ``ndim`` only for arrays (lists nested
    ``ndim`` deep, at most 6; PostgreSQL does not record a column's dimensionality)."""
    return arrow_of(resolve(type_oid, type_modifier, registry), binary, ndim)
