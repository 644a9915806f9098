"""``catalog``: the type catalog of a live server's tables written to a file, for archives
captured without one (``--catalog FILE`` of the commands that decode, or
``read_catalog(FILE).registry()`` as ``registry=``)."""

from __future__ import annotations

from ..typecatalog.catalog import catalog_from_connection, write_catalog
from .console import CliError, first_line

__all__ = ["write_server_catalog"]


def write_server_catalog(dsn: str, out: str, publication: str | None = None) -> dict:
    """Read one version of the type catalog of the tables of ``publication`` (every user
    table: None) from the server at ``dsn`` and write it to ``out``; returns what was
    written (types, lsn)."""
    import psycopg   # optional: the [cli] extra

    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.Error as e:
        raise CliError(f"cannot connect ({first_line(e)})") from None
    with conn:
        if publication is not None:
            names = [n.strip() for n in publication.split(",") if n.strip()]
            found = {r[0] for r in conn.execute("SELECT pubname FROM pg_publication WHERE pubname = ANY(%s)",
                                                (names,))}
            missing = [n for n in names if n not in found]
            if missing:
                raise CliError(f"publication {missing[0]!r} does not exist")
        try:
            cat = catalog_from_connection(conn, publication)
        except psycopg.Error as e:
            raise CliError(f"cannot read the type catalog ({first_line(e)})") from None
    try:
        write_catalog(out, cat)
    except OSError as e:
        raise CliError(f"{out}: {e.strerror or e}") from None
    v = cat.latest
    return {"types": len(v.types), "lsn": v.lsn, "out": out}
