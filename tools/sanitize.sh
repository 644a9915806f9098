#!/usr/bin/env bash
# The compiled extensions under AddressSanitizer and UndefinedBehaviorSanitizer, built
# apart, then the tests that drive the compiled code and every fuzz target on them.
#
#   tools/sanitize.sh [quick|full|fuzz]   (make test: quick; make sanitize: full, then
#                                          fuzz; make sanitize-fuzz: fuzz)
#
# quick and full build with gcc and its runtimes (Debian's gcc ships them: no clang
# needed) in build/sanitize. quick: the message and batch tests and each fuzz target's
# committed corpus, run once; full: also the converter, openGauss, transcoding and change
# tests. They do not fuzz: under gcc's preloaded libasan, which defines libFuzzer's
# coverage callbacks as weak no-ops, libFuzzer sees no coverage at all (atheris warns so).
# fuzz builds with clang in build/fuzzer, adding libFuzzer's coverage instrumentation
# (-fsanitize=fuzzer-no-link), so that atheris is guided by the branches and comparisons
# of the compiled code as well as by the Python it instruments; then FUZZ_SECONDS
# (default 60) of every fuzz target. clang and its compiler-rt are installed with apt-get
# when missing.
# Every buffer is its own allocation, so that a read past one is seen: Python's and
# Arrow's allocators are the system malloc, and the block cache of _native/memory is off.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MODE=${1:-full}
case $MODE in quick|full|fuzz) ;; *) echo "usage: $0 [quick|full|fuzz]" >&2; exit 2;; esac
PY=${PY:-.venv/bin/python}
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")   # absolute, the venv's own (no symlink resolved)
if [ "$MODE" = fuzz ]; then OUT=$ROOT/build/fuzzer; else OUT=$ROOT/build/sanitize; fi
LOG=$OUT.log

if [ "$MODE" = fuzz ]; then
  RTDIR=$(clang -print-runtime-dir 2>/dev/null || true)
  if [ ! -f "$RTDIR/libclang_rt.fuzzer_no_main-$(uname -m).a" ]; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
      || { echo "fuzz needs clang and compiler-rt (Debian: clang libclang-rt-dev)" >&2; exit 1; }
    echo "clang with compiler-rt: installing from apt"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends clang libclang-rt-dev >/dev/null
    RTDIR=$(clang -print-runtime-dir)
  fi
  export CC=clang CXX=clang++ LDSHARED="clang -shared" PGOUTPUT_CODEC_SANITIZE=fuzzer
else
  export PGOUTPUT_CODEC_SANITIZE=1
fi

# the package as it is, without its compiled modules, then built in place under the sanitizers
rm -rf "$OUT" && mkdir -p "$OUT"
tar cf - --exclude='*.so' --exclude=__pycache__ setup.py pgoutput_codec | tar xf - -C "$OUT"
(cd "$OUT" && "$PY" setup.py -q build_ext --inplace -j 2 >"$LOG" 2>&1) || { tail -30 "$LOG"; exit 1; }

if [ "$MODE" = fuzz ]; then
  # An extension built with fuzzer-no-link registers its counters and PC table as it is
  # loaded (__sanitizer_cov_8bit_counters_init, __sanitizer_cov_pcs_init) and calls
  # __sanitizer_cov_trace_cmp* as it runs, each bound to the first definition in the
  # global scope. atheris's own libFuzzer is loaded only when fuzzing starts, and not
  # globally; an ASan runtime defines the same callbacks as weak no-ops, so with ASan
  # preloaded alone the coverage goes nowhere. Hence one library preloaded: clang's ASan
  # runtime (UBSan's handlers included) and libFuzzer linked together, libFuzzer's strong
  # definitions winning, without ASan's .preinit_array object (a shared library may not
  # have one). atheris finds LLVMFuzzerRunDriver loaded and runs on this libFuzzer.
  RT=$OUT/asan_with_fuzzer.so
  cp "$RTDIR/libclang_rt.asan-$(uname -m).a" "$OUT/asan.a" && ar d "$OUT/asan.a" asan_preinit.cpp.o
  clang++ -shared -o "$RT" -Wl,--whole-archive "$RTDIR/libclang_rt.fuzzer_no_main-$(uname -m).a" \
    "$OUT/asan.a" -Wl,--no-whole-archive -lpthread -ldl
else
  RT=$(gcc -print-file-name=libasan.so)
fi
# libstdc++ beside the ASan runtime: atheris throws C++ exceptions, and ASan's
# __cxa_throw interceptor needs the real one present when it starts
export LD_PRELOAD="$RT $(gcc -print-file-name=libstdc++.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_odr_violation=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export PYTHONMALLOC=malloc ARROW_DEFAULT_MEMORY_POOL=system PGOUTPUT_CODEC_CACHE_MB=0
export PYTHONPATH=$OUT PYTHONDONTWRITEBYTECODE=1
# -P: the checkout is not on the path, so the package is the one built above (also for
# the fuzz targets, whose import paths come from tests/fuzz/harness.py)
"$PY" -P -c "
import sys; sys.path.insert(0, 'tests/fuzz'); import harness
import pgoutput_codec.pgoutput._decode as m, pgoutput_codec.opengauss._parse as g
assert m.__file__.startswith('$OUT') and g.__file__.startswith('$OUT'), m.__file__
print('sanitized build:', '$OUT')"

if [ "$MODE" != fuzz ]; then
  TESTS=(tests/pgoutput/test_vectors.py tests/pgoutput/test_malformed.py tests/pgoutput/test_batch.py
         tests/native/test_gather.py tests/native/test_keys.py tests/test_threads.py)
  [ "$MODE" = full ] && TESTS+=(tests/test_transcode.py tests/opengauss tests/types
                                tests/test_changes.py tests/pgoutput/test_roundtrip.py)
  "$PY" -P -m pytest -q -p no:cacheprovider -x "${TESTS[@]}"
fi

SECONDS_EACH=${FUZZ_SECONDS:-60}
for target in tests/fuzz/fuzz_*.py; do
  name=$(basename "$target" .py)
  corpus=tests/fuzz/corpus/${name#fuzz_}
  tmp=$(mktemp -d)
  if [ "$MODE" != fuzz ]; then
    "$PY" -P "$target" -rss_limit_mb=4096 -timeout=60 -artifact_prefix="$tmp/" "$corpus"/* 2>"$tmp/log" \
      || { tail -40 "$tmp/log"; echo "$name: report above, inputs in $tmp" >&2; exit 1; }
    echo "$name: $(ls "$corpus" | wc -l) corpus inputs, no report"
  else
    # the committed corpus as the start; what the run adds stays in $tmp, not in the tree
    mkdir "$tmp/corpus" && cp -r "$corpus"/. "$tmp/corpus"/
    "$PY" -P "$target" -max_total_time="$SECONDS_EACH" -rss_limit_mb=4096 -timeout=60 \
      -artifact_prefix="$tmp/" "$tmp/corpus" 2>"$tmp/log" \
      || { tail -40 "$tmp/log"; echo "$name: report above, inputs in $tmp" >&2; exit 1; }
    runs=$(grep -Eo '^#[0-9]+' "$tmp/log" | tail -1 | tr -d '#' || true)
    # coverage of the compiled code reaches libFuzzer only through the preloaded one
    grep -q 'Using preloaded libfuzzer' "$tmp/log" \
      || { tail -40 "$tmp/log"; echo "$name: atheris ran its own libFuzzer" >&2; exit 1; }
    counters=$(sed -nE 's/^INFO: Loaded [0-9]+ modules +\(([0-9]+) inline 8-bit counters.*/\1/p' "$tmp/log")
    cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$tmp/log" | tail -1 || true)
    echo "$name: $runs runs in $SECONDS_EACH s, $counters compiled-code counters, $cov, no report"
  fi
  rm -rf "$tmp"
done
