# pgoutput_codec — every target installs what it needs into .venv on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
# make test's parts, longest first (see test:)
TEST_PARTS = test-part-core test-part-spark test-part-spark-replay test-part-connect test-part-spark35 \
	test-part-sanitize
# PySpark 3.5's own venv (make test-spark35)
SPARK35 ?= .venv-spark35
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: all build test $(TEST_PARTS) test-cluster pack test-fast test-spark35 test-connect lint docs fuzz sanitize sanitize-fuzz bench corpus demo clean wheel system

all: build

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "setuptools>=77" wheel "cython>=3.1,<4"
	$(PIP) install -q --no-build-isolation -e ".[test,spark,connect,bench,cli,demo]"
	touch $(STAMP)

build: $(STAMP)
	$(PY) setup.py -q build_ext --inplace -j 2

system:
	bash tools/ensure_system.sh

# The suite's parts, two at a time (two cores): most of a Spark test's time is the JVM and
# its Python workers waiting on each other, so two sessions side by side take far less
# than one after the other (measured: the 3.5 and Connect runs, 8 min in a row, 5:18
# together). make starts the parts in the order listed, longest first (as measured in
# CI's --durations), each as soon as one before it ends: the slots balance themselves
# whatever a part's length becomes (two fixed lanes of unequal length leave a core idle
# until the longer ends), within the longest part. Each part's output is printed whole
# when it ends; a part that fails stops none of the others (--keep-going), so that one
# run names every failure.
# The cluster tests (2 min) run once the extensions are built, while the system packages
# and PySpark 3.5 install: beside a part, the cluster's five JVMs slowed both by a fifth.
test:
	$(MAKE) -j3 --output-sync=target --no-print-directory test-cluster system $(SPARK35)/.installed
	$(MAKE) -j2 --keep-going --output-sync=target --no-print-directory $(TEST_PARTS)

# --durations: CI's log names where the suite's time goes (it must stay well under 30 min)
DURATIONS ?= --durations=25
# The JVMs the core suite's own Spark sessions start (the README's and the notebook's
# blocks, the demo) run the client compiler only, with one GC thread, as tests/spark's
# (tests/spark/conftest.py JVM_OPTIONS): a short session never pays back C2's warm-up.
SPARK_TEST_SUBMIT = PYSPARK_SUBMIT_ARGS='--driver-java-options "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" pyspark-shell'
# the parts assume make test's prerequisites
test-part-core:
	$(SPARK_TEST_SUBMIT) $(PY) -m pytest -q $(DURATIONS) --ignore=tests/spark
# tests/spark on PySpark 4 in two parts of about equal length, each its own session: the
# longest files, and every other file (a new file lands there)
SPARK_REPLAY = tests/spark/test_replay_spark.py tests/spark/test_typed_tables_spark.py \
	tests/spark/test_big_table_spark.py
test-part-spark:
	$(PY) -m pytest -q $(DURATIONS) tests/spark $(addprefix --ignore=,$(SPARK_REPLAY))
test-part-spark-replay:
	$(PY) -m pytest -q $(DURATIONS) $(SPARK_REPLAY)
test-part-connect:
	$(PYTEST_CONNECT)
test-part-spark35:
	$(PYTEST_SPARK35)
test-part-sanitize:
	bash tools/sanitize.sh quick

# the tests marked on_cluster again, on a standalone cluster (a master and two one-core
# workers, separate processes) whose executors get the package only through ship()
PYTEST_CLUSTER = PGOUTPUT_CODEC_SPARK_CLUSTER=1 $(PY) -m pytest -q $(DURATIONS) -m on_cluster tests/spark
test-cluster: build
	$(PYTEST_CLUSTER)

test-fast: build
	$(PY) -m pytest -q -m "not slow"

# tests/spark again on PySpark 3.5 (no arrow_udf, no Python data sources), but for the long tests
# marked same_code_on_spark35 (other tests of the lane run their 3.5 code paths): its own venv,
# pgoutput_codec (with the extensions built in place) from PYTHONPATH; pandas 2, the
# pandas PySpark 3.5 was released for.
$(SPARK35)/.installed:
	$(PYTHON) -m venv $(SPARK35)
	$(SPARK35)/bin/pip install -q "pyspark>=3.5,<3.6" pyarrow numpy "pandas>=2,<3" pytest hypothesis
	touch $@

PYTEST_SPARK35 = PYTHONPATH=$(CURDIR) $(SPARK35)/bin/python -m pytest -q $(DURATIONS) -m "not same_code_on_spark35" tests/spark
test-spark35: build $(SPARK35)/.installed
	$(PYTEST_SPARK35)

# tests/spark again with a Spark Connect session: a local Connect server, the tests its
# client (no SparkContext, no broadcast, no RDD; foreachBatch runs in the server)
PYTEST_CONNECT = PGOUTPUT_CODEC_SPARK_CONNECT=1 $(PY) -m pytest -q $(DURATIONS) -m "not same_code_on_connect" tests/spark
test-connect: build
	$(PYTEST_CONNECT)

lint: $(STAMP)
	$(VENV)/bin/ruff check pgoutput_codec tests bench
	$(VENV)/bin/cython-lint pgoutput_codec

# the documentation site (docs/: the guides, the quickstart executed, the API reference of
# docs/api), warnings as errors: build/docs/index.html
docs: build
	$(PY) -m sphinx -W --keep-going -b html docs build/docs

# every atheris harness of tests/fuzz for FUZZ_SECONDS each, into the persistent fuzz_corpus/
fuzz: build
	for h in tests/fuzz/fuzz_*.py; do $(PY) $$h -max_total_time=$${FUZZ_SECONDS:-300} || exit 1; done

# the extensions under AddressSanitizer + UndefinedBehaviorSanitizer: the compiled-code and
# change tests and every committed corpus (gcc, build/sanitize), then FUZZ_SECONDS
# (default 60) of every harness guided by the compiled code's coverage (clang, build/fuzzer)
sanitize: build
	bash tools/sanitize.sh full
	bash tools/sanitize.sh fuzz

# every harness for FUZZ_SECONDS (default 60) on a clang build of the extensions under
# ASan and UBSan with libFuzzer's coverage instrumentation (build/fuzzer), so that the
# fuzzer is guided by the compiled code too; installs clang with apt-get if missing
sanitize-fuzz: $(STAMP)
	bash tools/sanitize.sh fuzz

bench: build
	$(PY) bench/decode_bench.py

corpus: build
	$(PY) tools/capture_corpus.py

# real server -> capture -> archive -> Spark -> tables checked against the server (demo_out/)
demo: build
	$(PY) -m pgoutput_codec.demo --out demo_out

# the packed environment for spark-submit --archives (docs/cluster.md): dist/
pack: build
	$(PY) -m pgoutput_codec.cli pack -o dist/pgoutput_codec-env.tar.gz

wheel: $(STAMP)
	$(PIP) wheel --no-deps --no-build-isolation -w dist .

clean:
	rm -rf build dist *.egg-info pgoutput_codec/*.so pgoutput_codec/*.c pgoutput_codec/**/*.so pgoutput_codec/**/*.c
