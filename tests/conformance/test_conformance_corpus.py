"""The committed corpus (``tests/data``, written by ``make corpus``) decoded without a server.

Every live-server test of ``test_conformance.py`` runs again here on the committed bytes
and ground truth of each server: full decode with stream tracking, byte-exact re-encode,
``decode_batch``, the pure-Python twin, xid/LSN relations, catalog, values, replay and the
scenario facts.
"""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest

import scenarios
from test_conformance import *  # noqa: F401,F403  (the same tests, on the corpus fixture below)

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
FILES = [os.path.join(DATA, n) for n in ("corpus.parquet", "tables.parquet", "ground_truth.json")]


def _load():
    if not all(os.path.exists(p) for p in FILES):
        return {}
    with open(FILES[2], encoding="utf-8") as fh:
        truth = json.load(fh)["servers"]
    corpus = pq.read_table(FILES[0]).to_pylist()
    tables = pq.read_table(FILES[1]).to_pylist()
    out = {}
    for t in truth:
        ver = t["version"].split()[0]
        out[f"corpus-pg{t['major']}"] = (t, [r for r in corpus if r["server_version"] == ver],
                                         [r for r in tables if r["server_version"] == ver])
    return out


_CORPUS = _load()


@pytest.fixture(scope="module", params=sorted(_CORPUS) or ["missing"])
def capture(request):
    if request.param == "missing":
        pytest.fail(f"committed corpus missing: {FILES} (run `make corpus`)")
    return scenarios.Capture.from_corpus(*_CORPUS[request.param])


def test_corpus_has_three_servers_and_is_small():
    assert sorted(_CORPUS) == ["corpus-pg15", "corpus-pg16", "corpus-pg18"]
    assert sum(os.path.getsize(p) for p in FILES) < 600_000
