"""Build the Cython extensions of pgoutput_codec.

Every ``pgoutput_codec/**/*.pyx`` becomes an extension module of the same dotted name.
Cython directives live here and only here.

Environment switches:
- ``PGOUTPUT_CODEC_DEBUG=1``: -O0 -g, line tracing, annotated HTML, invariant checks
  (``boundscheck``/``wraparound`` back on, so a wrong index raises instead of reading junk).
- ``PGOUTPUT_CODEC_ONLY=name[,name]``: build only the modules whose dotted name
  contains one of the names (fast rebuilds while working on one module).
- ``PGOUTPUT_CODEC_QUICK=1``: -O0 with the release directives, for builds whose speed
  does not matter (the packaging test's wheel: its C compiles in a third of the time).
- ``PGOUTPUT_CODEC_SANITIZE=1``: the release directives under AddressSanitizer and
  UndefinedBehaviorSanitizer (-O1, frame pointers kept; ``tools/sanitize.sh`` builds
  and runs it). ``PGOUTPUT_CODEC_SANITIZE=fuzzer``: also libFuzzer's coverage
  instrumentation (clang; ``tools/sanitize.sh fuzz`` builds and runs it), so that atheris
  is guided by the compiled code too.
"""

import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("PGOUTPUT_CODEC_DEBUG") == "1"
ONLY = [s for s in os.environ.get("PGOUTPUT_CODEC_ONLY", "").split(",") if s]
QUICK = os.environ.get("PGOUTPUT_CODEC_QUICK") == "1"
SANITIZE = os.environ.get("PGOUTPUT_CODEC_SANITIZE", "")
SANITIZERS = "address,undefined" + (",fuzzer-no-link" if SANITIZE == "fuzzer" else "")

DIRECTIVES = {
    "language_level": 3,
    "embedsignature": True,
    "cdivision": True,
    # Safe because every read goes through the length check in _native/reader.pxd.
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "linetrace": DEBUG,
}


def extensions():
    exts = []
    for pyx in sorted(glob.glob(os.path.join("pgoutput_codec", "**", "*.pyx"), recursive=True)):
        name = pyx[: -len(".pyx")].replace(os.sep, ".")
        if ONLY and not any(o in name for o in ONLY):
            continue
        exts.append(
            Extension(
                name,
                [pyx],
                extra_compile_args=(["-O0", "-g"] if DEBUG else ["-O0"] if QUICK else
                                    ["-O1", "-g", "-fno-omit-frame-pointer", f"-fsanitize={SANITIZERS}",
                                     "-fno-sanitize-recover=undefined"] if SANITIZE else ["-O3"])
                + ["-Wno-unused-function"],
                extra_link_args=[f"-fsanitize={SANITIZERS}"] if SANITIZE else [],
                define_macros=[("CYTHON_TRACE_NOGIL", "1")] if DEBUG else [],
            )
        )
    return cythonize(exts, compiler_directives=DIRECTIVES, annotate=DEBUG, nthreads=os.cpu_count() or 1)


setup(ext_modules=extensions())
