"""Shared pytest fixtures of pgoutput_codec (kept generic: every test directory uses it).

- ``impl``: every decoder test runs on both implementations, the compiled modules
  (``_decode`` + ``batch``) and the plain-Python twin (``_decode_py``), as yarl runs
  its quoting tests on ``_quoting_c`` and ``_quoting_py``.
- ``pg_server``: a PostgreSQL server of the test module's own (the first version
  ``testing.pgserver`` finds), started as an unprivileged user, stopped after the module.
- "Exception ignored" (an exception swallowed in a ``noexcept`` Cython function, or a
  failing ``__del__``) fails the test that caused it: such an exception goes through
  ``sys.unraisablehook``, which pytest turns into a ``PytestUnraisableExceptionWarning``;
  we make that warning an error.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest


def pytest_configure(config):
    config.addinivalue_line("filterwarnings", "error::pytest.PytestUnraisableExceptionWarning")
    config.addinivalue_line("markers", "slow: long-running test (skipped by `make test-fast`)")
    config.addinivalue_line("markers", "same_code_on_connect: a long Spark test whose code paths a Spark "
                            "Connect session shares with the classic one (`make test-connect` leaves it out)")
    config.addinivalue_line("markers", "same_code_on_spark35: a long Spark test whose PySpark 3.5 code paths "
                            "(mapInArrow and pandas_udf for arrow_udf, the 3.5 SQL of snapshot and history) "
                            "other tests of that lane run too (`make test-spark35` leaves it out)")
    config.addinivalue_line("markers", "on_cluster: a Spark test that also runs on a standalone cluster whose "
                            "executors get the package shipped (`make test-cluster`)")


def _compiled():
    # No skip: `make test` builds the extensions first, so a missing one is a failure.
    dec = importlib.import_module("pgoutput_codec.pgoutput._decode")
    batch = importlib.import_module("pgoutput_codec.pgoutput.batch")
    return SimpleNamespace(name="compiled", decode_message=dec.decode_message,
                           decode_batch=batch.decode_batch)


def _python():
    mod = importlib.import_module("pgoutput_codec.pgoutput._decode_py")
    return SimpleNamespace(name="python", decode_message=mod.decode_message,
                           decode_batch=mod.decode_batch)


IMPLS = {"compiled": _compiled, "python": _python}


@pytest.fixture(params=sorted(IMPLS), scope="session")
def impl(request):
    """One decoder implementation: ``.name``, ``.decode_message``, ``.decode_batch``."""
    return IMPLS[request.param]()


@pytest.fixture(scope="session")
def compiled_impl():
    return _compiled()


@pytest.fixture(scope="session")
def python_impl():
    return _python()


@pytest.fixture(scope="module")
def pg_server():
    pytest.importorskip("psycopg")      # (PySpark 3.5's environment has no client)
    from pgoutput_codec.testing import pgserver
    try:
        spec = pgserver.first_available()
    except RuntimeError as e:
        pytest.skip(str(e))
    srv = pgserver.PgServer(spec)
    srv.start()
    yield srv
    srv.stop()
