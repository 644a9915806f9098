"""The atheris harnesses of tests/fuzz in a subprocess, so that a segfault or an abort in
compiled code fails the test: each one's committed corpus (tests/fuzz/corpus/NAME: the
inputs that found a bug once, and a minimized corpus of earlier runs) run once, then a
short bounded fuzzing run from its seeds."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

FUZZ = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz")
#: seconds of each bounded run (PGOUTPUT_FUZZ_SMOKE_SECONDS scales them all)
SCALE = float(os.environ.get("PGOUTPUT_FUZZ_SMOKE_SECONDS", "10")) / 10
#: harness -> (seconds, seeds it writes)
HARNESSES = {"decode": (6, 40), "transcode": (3, 6), "changes": (4, 60), "convert": (3, 85), "archive": (2, 4),
             "opengauss": (4, 5), "copyrows": (3, 19)}


def _run(tmp_path, name, args, timeout):
    proc = subprocess.run(
        [sys.executable, os.path.join(FUZZ, f"fuzz_{name}.py"), "-timeout=20", "-rss_limit_mb=2048",
         f"-artifact_prefix={tmp_path}{os.sep}", *args],
        capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    crashes = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-", "leak-"))]
    assert proc.returncode == 0, f"fuzzer exit {proc.returncode}, artifacts {crashes}:\n{out[-4000:]}"
    assert not crashes, crashes
    assert "Exception ignored" not in out, out[-4000:]
    return out


@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_fuzz_corpus_runs_clean(tmp_path, name):
    pytest.importorskip("atheris")
    corpus = os.path.join(FUZZ, "corpus", name)
    files = sorted(os.path.join(corpus, f) for f in os.listdir(corpus))
    assert files, f"no committed corpus for fuzz_{name}.py"
    out = _run(tmp_path, name, files, 600)
    assert out.count("Executed ") == len(files), out[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_fuzz_smoke(tmp_path, name):
    pytest.importorskip("atheris")
    seconds, seeds = HARNESSES[name]
    seconds = max(1, round(seconds * SCALE))
    corpus = tmp_path / "corpus"
    out = _run(tmp_path, name, [f"-max_total_time={seconds}", str(corpus)], seconds + 120)
    assert "Done " in out, out[-2000:]
    assert len(list(corpus.iterdir())) >= seeds  # the seeds were written and read
