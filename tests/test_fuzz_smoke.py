"""Short bounded runs of the atheris harnesses (tests/fuzz/fuzz_decode.py, the compiled
decoder; tests/fuzz/fuzz_transcode.py, the compiled transcoding loop) in a subprocess,
so a segfault or an abort in compiled code fails this test."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

FUZZ = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz")
SECONDS = int(os.environ.get("PGOUTPUT_FUZZ_SMOKE_SECONDS", "10"))


@pytest.mark.slow
@pytest.mark.parametrize("harness,seconds,seeds", [("fuzz_decode.py", SECONDS, 40),
                                                   ("fuzz_transcode.py", max(SECONDS // 2, 1), 6)])
def test_fuzz_smoke(tmp_path, harness, seconds, seeds):
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    proc = subprocess.run(
        [sys.executable, os.path.join(FUZZ, harness), f"-max_total_time={seconds}", "-timeout=20",
         "-rss_limit_mb=1024", f"-artifact_prefix={tmp_path}{os.sep}", str(corpus)],
        capture_output=True, text=True, timeout=seconds + 120,
    )
    out = proc.stdout + proc.stderr
    crashes = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-", "leak-"))]
    assert proc.returncode == 0, f"fuzzer exit {proc.returncode}, artifacts {crashes}:\n{out[-4000:]}"
    assert not crashes, crashes
    assert "Exception ignored" not in out, out[-4000:]
    assert "Done " in out, out[-2000:]
    assert len(list(corpus.iterdir())) >= seeds  # the seeds were written and read
