"""A short bounded run of the atheris harness (tests/fuzz/fuzz_decode.py) in a
subprocess, so a segfault or an abort in the compiled decoder fails this test."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz", "fuzz_decode.py")
SECONDS = int(os.environ.get("PGOUTPUT_FUZZ_SMOKE_SECONDS", "20"))


@pytest.mark.slow
def test_fuzz_smoke(tmp_path):
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    proc = subprocess.run(
        [sys.executable, HARNESS, f"-max_total_time={SECONDS}", "-timeout=20", "-rss_limit_mb=1024",
         f"-artifact_prefix={tmp_path}{os.sep}", str(corpus)],
        capture_output=True, text=True, timeout=SECONDS + 120,
    )
    out = proc.stdout + proc.stderr
    crashes = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-", "leak-"))]
    assert proc.returncode == 0, f"fuzzer exit {proc.returncode}, artifacts {crashes}:\n{out[-4000:]}"
    assert not crashes, crashes
    assert "Exception ignored" not in out, out[-4000:]
    assert "Done " in out, out[-2000:]
    assert len(list(corpus.iterdir())) >= 40  # the seeds were written and read
