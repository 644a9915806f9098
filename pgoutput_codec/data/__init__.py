"""Data files shipped with the package."""

from __future__ import annotations

from importlib import resources

__all__ = ["sample_archive_path"]


def sample_archive_path() -> str:
    """The path of the small archive shipped with the package: the demo's workload captured
    into Parquet (``seq``, ``lsn``, ``lsn_ordinal``, ``xid``, ``data``)."""
    return str(resources.files(__name__).joinpath("sample_archive.parquet"))
