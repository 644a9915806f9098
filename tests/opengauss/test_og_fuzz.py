"""Runs the atheris target briefly as a subprocess, seeded with valid frames."""

import os
import subprocess
import sys

import pytest

from pgoutput_codec.opengauss.encode import encode_frame, encode_text_frame, xlogdata

from ogdata import sample_records

TARGET = os.path.join(os.path.dirname(__file__), "..", "fuzz", "fuzz_opengauss.py")


def test_fuzz_target_runs_clean(tmp_path):
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    recs = sample_records()
    seeds = [encode_frame(recs), encode_frame(recs, end="P0", xlog=(1, 2, 3)), xlogdata(encode_frame(recs[:1])),
             encode_text_frame([recs[0], recs[-1]], style="t"),
             b"table public t1 UPDATE: old-key: a[integer]:3 new-tuple: a[integer]:4 b[text]:'it''s' c[text]:null"]
    for i, s in enumerate(seeds):
        (corpus / f"seed{i}").write_bytes(s)
    # artifacts go to tmp_path (as in tests/test_fuzz_smoke.py), not into the checkout
    r = subprocess.run([sys.executable, TARGET, "-max_total_time=8", "-rss_limit_mb=1024",
                        f"-artifact_prefix={tmp_path}{os.sep}", str(corpus)],
                       capture_output=True, text=True, timeout=120)
    crashes = [p.name for p in tmp_path.iterdir() if p.is_file()]
    assert r.returncode == 0, f"artifacts {crashes}:\n{r.stderr[-3000:]}"
    assert "Exception ignored" not in r.stderr
