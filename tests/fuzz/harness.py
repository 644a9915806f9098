"""What the atheris harnesses (``fuzz_decode.py``, ``fuzz_transcode.py``) share: the
import paths, and a ``main`` that writes the seeds into the corpus directory on every
start (the persistent ``fuzz_corpus/NAME``, git-ignored, unless one is given), puts
crash inputs in ``fuzz_corpus/`` unless ``-artifact_prefix=`` is given, runs the seeds
once before fuzzing (they must pass), and runs one crash input again when given a file."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
# the checkout's package, unless PYTHONPATH names one (the sanitized builds of tools/sanitize.sh)
_GIVEN = any(os.path.isdir(os.path.join(p, "pgoutput_codec"))
             for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
for _p in (TESTS,) if _GIVEN else (TESTS, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)


def main(argv, name, seeds, test_one_input):
    import atheris

    args = list(argv)
    corpus = [a for a in args[1:] if not a.startswith("-")]
    if not corpus:
        corpus = [os.path.join(ROOT, "fuzz_corpus", name)]
        args.append(corpus[0])
    if not any(a.startswith("-artifact_prefix=") for a in args):
        os.makedirs(os.path.join(ROOT, "fuzz_corpus"), exist_ok=True)
        args.append(f"-artifact_prefix={os.path.join(ROOT, 'fuzz_corpus')}{os.sep}")
    if not os.path.isfile(corpus[0]):       # a file: a crash input run again
        os.makedirs(corpus[0], exist_ok=True)
        for i, seed in enumerate(seeds()):
            with open(os.path.join(corpus[0], f"seed-{i:03d}"), "wb") as f:
                f.write(seed)
    for seed in seeds():  # the seeds themselves must pass before fuzzing starts
        test_one_input(seed)
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()
