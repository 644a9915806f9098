"""A throwaway Spark standalone cluster on 127.0.0.1, for the cluster tests and benchmarks.

A master and ``workers`` workers, each its own JVM and process group, started with the
``spark-class`` launcher that the ``pyspark`` wheel carries. Each worker has its own
working directory (where its executors unpack ``spark.archives`` and run) and its own
scratch directories, and sees nothing of the driver's:

- the workers start with no ``PYTHONPATH``, no ``PYSPARK_PYTHON`` and no virtual
  environment in their environment;
- where the kernel allows unprivileged user and mount namespaces (``unshare``), each
  worker runs in its own mount namespace in which the paths named in ``hide`` (the
  package's source tree, the driver's temporary directory) are empty: an executor that
  reads a path only the driver has fails, as it would on another host. ``isolated`` says
  whether that is so.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

__all__ = ["StandaloneCluster", "spark_home", "can_isolate"]


def spark_home() -> str:
    """SPARK_HOME, or the ``pyspark`` package's directory (the wheel carries the jars and
    ``bin/spark-class``)."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return home
    import pyspark
    return os.path.dirname(pyspark.__file__)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def can_isolate() -> bool:
    """Whether a process can be given its own mount namespace here (``unshare``)."""
    if not shutil.which("unshare"):
        return False
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run(["unshare", "--user", "--map-current-user", "--mount", "--propagation", "private",
                            "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d],
                           capture_output=True)
    return r.returncode == 0


class StandaloneCluster:
    """``with StandaloneCluster(workers=2) as c: ... SparkSession.builder.master(c.url)``."""

    def __init__(self, workers=2, cores=1, memory="2g", hide=(), base_dir=None, start_timeout=90, pin=False):
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.hide = [str(Path(p).resolve()) for p in hide]
        self.start_timeout = start_timeout
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="pgoutput-codec-cluster-"))
        self.isolated = bool(self.hide) and can_isolate()
        #: pin: worker k and its executors run on CPU k only (taskset), so that executors do not
        #: share a CPU while the machine has one per worker
        self.pin = pin and shutil.which("taskset") is not None and workers <= (os.cpu_count() or 1)
        self._procs = []
        self.url = None

    def _env(self):
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV",
                            "SPARK_LOCAL_DIRS", "TMPDIR")}
        env["SPARK_HOME"] = spark_home()
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env.setdefault("SPARK_NO_DAEMONIZE", "1")
        return env

    def _start(self, name, cls, args, env, isolate, cpu=None):
        cmd = [os.path.join(spark_home(), "bin", "spark-class"), cls, *args]
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu), *cmd]
        if isolate:
            # an empty tmpfs over each hidden path, then the worker itself (exec keeps its pid)
            mounts = " && ".join(f'mount -t tmpfs -o size=64k tmpfs "${{{i + 1}}}"' for i in range(len(self.hide)))
            cmd = ["unshare", "--user", "--map-current-user", "--mount", "--propagation", "private",
                   "sh", "-c", f'{mounts} && shift {len(self.hide)} && exec "$@"', "sh", *self.hide, *cmd]
        log = open(self.base_dir / f"{name}.log", "wb")
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, cwd=self.base_dir / name)
        log.close()
        self._procs.append(p)
        return p

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        env = self._env()
        port, ui = _free_port(), _free_port()
        (self.base_dir / "master").mkdir(parents=True, exist_ok=True)
        self._start("master", "org.apache.spark.deploy.master.Master",
                    ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)], env, False)
        self.url = f"spark://127.0.0.1:{port}"
        for i in range(self.workers):
            name = f"worker{i + 1}"
            wdir = self.base_dir / name
            (wdir / "work").mkdir(parents=True, exist_ok=True)
            (wdir / "local").mkdir(exist_ok=True)
            wenv = dict(env, SPARK_LOCAL_DIRS=str(wdir / "local"), TMPDIR=str(wdir / "local"))
            self._start(name, "org.apache.spark.deploy.worker.Worker",
                        ["--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                         "--webui-port", str(_free_port()), "--work-dir", str(wdir / "work"), self.url],
                        wenv, self.isolated, cpu=i if self.pin else None)
        self._wait_for_workers(f"http://127.0.0.1:{ui}/json/")
        return self

    def _wait_for_workers(self, ui_url):
        deadline = time.monotonic() + self.start_timeout
        alive = 0
        while time.monotonic() < deadline:
            for p in self._procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark cluster process exited ({p.args[-1]}): see {self.base_dir}")
            try:
                with urllib.request.urlopen(ui_url, timeout=2) as r:
                    alive = json.load(r).get("aliveworkers", 0)
                if alive >= self.workers:
                    return
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"{alive} of {self.workers} Spark workers registered in {self.start_timeout} s: "
                           f"see the logs in {self.base_dir}")

    def work_dirs(self):
        """The workers' working directories (one directory per application inside)."""
        return [self.base_dir / f"worker{i + 1}" / "work" for i in range(self.workers)]

    def stop(self):
        for p in reversed(self._procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self._procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self._procs.clear()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)
