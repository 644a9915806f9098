#!/usr/bin/env bash
# The compiled extensions under AddressSanitizer and UndefinedBehaviorSanitizer (gcc's
# runtimes, which Debian's gcc ships: no clang needed), built apart in build/sanitize,
# then the tests that drive the compiled code and every fuzz target on them.
#
#   tools/sanitize.sh [quick|full]      (make sanitize: full; make test: quick)
#
# quick: the message and batch tests and each fuzz target's committed corpus, run once;
# full: also the converter, openGauss, transcoding and change tests, and FUZZ_SECONDS
# (default 60) of fuzzing per target.
# Every buffer is its own allocation, so that a read past one is seen: Python's and
# Arrow's allocators are the system malloc, and the block cache of _memory is off.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MODE=${1:-full}
PY=${PY:-.venv/bin/python}
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")   # absolute, the venv's own (no symlink resolved)
OUT=$ROOT/build/sanitize
LOG=$ROOT/build/sanitize.log

# the package as it is, without its compiled modules, then built in place under the sanitizers
rm -rf "$OUT" && mkdir -p "$OUT"
tar cf - --exclude='*.so' --exclude=__pycache__ setup.py pgoutput_codec | tar xf - -C "$OUT"
(cd "$OUT" && PGOUTPUT_CODEC_SANITIZE=1 "$PY" setup.py -q build_ext --inplace -j 2 >"$LOG" 2>&1) \
  || { tail -30 "$LOG"; exit 1; }

# libstdc++ beside the ASan runtime: atheris throws C++ exceptions, and ASan's
# __cxa_throw interceptor needs the real one present when it starts
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_odr_violation=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export PYTHONMALLOC=malloc ARROW_DEFAULT_MEMORY_POOL=system PGOUTPUT_CODEC_CACHE_MB=0
export PYTHONPATH=$OUT PYTHONDONTWRITEBYTECODE=1
# -P: the checkout is not on the path, so the package is the one built above (also for
# the fuzz targets, whose import paths come from tests/fuzz/harness.py)
"$PY" -P -c "
import sys; sys.path.insert(0, 'tests/fuzz'); import harness
import pgoutput_codec._decode as m, pgoutput_codec.opengauss._binary as g
assert m.__file__.startswith('$OUT') and g.__file__.startswith('$OUT'), m.__file__
print('sanitized build:', '$OUT')"

TESTS=(tests/test_vectors.py tests/test_malformed.py tests/test_batch.py tests/test_gather.py tests/test_threads.py)
[ "$MODE" = full ] && TESTS+=(tests/test_transcode.py tests/opengauss tests/test_types.py tests/test_casts.py
                              tests/test_changes.py tests/test_roundtrip.py)
"$PY" -P -m pytest -q -p no:cacheprovider -x "${TESTS[@]}"

for target in tests/fuzz/fuzz_*.py; do
  name=$(basename "$target" .py)
  corpus=tests/fuzz/corpus/${name#fuzz_}
  tmp=$(mktemp -d)
  if [ "$MODE" = full ]; then
    cp -r "$corpus"/. "$tmp"/ 2>/dev/null || true
    "$PY" -P "$target" -max_total_time="${FUZZ_SECONDS:-60}" -rss_limit_mb=4096 -timeout=60 \
      -artifact_prefix="$tmp/" "$tmp" 2>"$tmp/log" || { tail -40 "$tmp/log"; exit 1; }
    echo "$name: $(grep -Eo '#[0-9]+' "$tmp/log" | tail -1 | tr -d '#') runs in ${FUZZ_SECONDS:-60} s, no report"
  else
    "$PY" -P "$target" -rss_limit_mb=4096 -timeout=60 -artifact_prefix="$tmp/" "$corpus"/* 2>"$tmp/log" \
      || { tail -40 "$tmp/log"; exit 1; }
    echo "$name: $(ls "$corpus" | wc -l) corpus inputs, no report"
  fi
  rm -rf "$tmp"
done
