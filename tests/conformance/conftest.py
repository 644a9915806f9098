"""Fixtures: one real PostgreSQL server per version (15, 16, 18), started once per session.

``pg_server`` is parametrized by version; a version whose binaries cannot be had is
skipped with the reason (never a silent pass). Servers are stopped at session end, on
failure too (fixture finalizer, plus an atexit hook in ``servers.py``).
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import checks  # noqa: E402
import servers  # noqa: E402

SPECS = {spec.major: spec for spec in servers.server_specs()}

_STARTED = {}


@pytest.fixture(scope="session", params=sorted(SPECS), ids=lambda m: f"pg{m}")
def pg_server(request):
    spec = SPECS[request.param]
    if spec.bindir is None:
        pytest.skip(f"PostgreSQL {spec.major}: {spec.missing_reason}")
    srv = servers.PgServer(spec)
    request.addfinalizer(srv.stop)
    srv.start()
    _STARTED[spec.major] = srv.version
    return srv


@pytest.fixture(scope="session")
def capture(pg_server):
    """Run every scenario on the server and peek the slots with every option set it accepts."""
    import scenarios

    return scenarios.run_all(pg_server)


def pytest_terminal_summary(terminalreporter):
    counts = checks.ROUNDTRIP_COUNTS
    if not counts and not _STARTED:
        return
    tr = terminalreporter
    tr.section("pgoutput conformance: real messages decoded + re-encoded byte-exact")
    for major, version in sorted(_STARTED.items()):
        tr.write_line(f"pg{major}: PostgreSQL {version}")
    for (label, optset), per_tag in sorted(counts.items()):
        total = sum(per_tag.values())
        detail = " ".join(f"{tag}={n}" for tag, n in sorted(per_tag.items()))
        tr.write_line(f"{label:11} {optset:24} {total:5} msgs  {detail}")
