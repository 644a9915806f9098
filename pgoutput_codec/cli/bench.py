"""``bench``: the benchmarks of ``bench/`` (a source checkout), each run as a script, and
their tables printed."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile

from .console import CliError

__all__ = ["run_bench"]


def _bench_dir():
    """``bench/`` of the source checkout: under the working directory, or beside the package."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for cand in (os.path.join(os.getcwd(), "bench"), os.path.join(here, "bench")):
        if os.path.isfile(os.path.join(cand, "decode_bench.py")):
            return cand
    raise CliError("bench/decode_bench.py not found: run from a source checkout of pgoutput_codec")


#: small sizes for --quick (each script has its own flags)
_QUICK = {
    "decode_bench.py": ["--n", "20000", "--repeat", "2", "--pyp-n", "2000"],
    "changes_bench.py": ["-n", "20000", "--repeat", "2"],
    "convert_bench.py": ["--n", "100000", "--repeat", "2"],
    "opengauss_bench.py": ["--records", "20000", "--repeat", "2"],
    "plan_bench.py": ["--transactions", "20000", "--repeat", "1"],
    "parallel_bench.py": ["-n", "40000", "--repeat", "1"],
    "transcode_bench.py": ["-n", "5000", "--repeat", "1", "--plain-n", "1000"],
}


def run_bench(only=None, quick=False) -> int:
    """Run ``bench/decode_bench.py`` and the other ``bench/*_bench.py`` scripts (``only``:
    these names) with this Python; exit status 0, or a CliError naming those that failed.
    ``quick``: small sizes, run from copies in a scratch directory (results not saved)."""
    bdir = _bench_dir()
    scripts = ["decode_bench.py"] + sorted(os.path.basename(p) for p in glob.glob(os.path.join(bdir, "*_bench.py"))
                                           if os.path.basename(p) != "decode_bench.py")
    if only:
        wanted = {o if o.endswith(".py") else f"{o}_bench.py" for o in only}
        unknown = wanted - set(scripts)
        if unknown:
            raise CliError(f"no such benchmark: {', '.join(sorted(unknown))} (have: {', '.join(scripts)})")
        scripts = [s for s in scripts if s in wanted]
    env = dict(os.environ)
    root = os.path.dirname(bdir)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("MPLBACKEND", "Agg")
    work = None
    if quick:   # quick runs must not overwrite bench/results: run copies in a scratch dir
        work = tempfile.mkdtemp(prefix="pgoutput-bench-")
        os.makedirs(os.path.join(work, "results"))
    failed = []
    try:
        for s in scripts:
            path = os.path.join(bdir, s)
            args = []
            if quick:
                shutil.copy(path, work)
                path = os.path.join(work, s)
                args = _QUICK.get(s, [])
                if s in ("decode_bench.py",):
                    args += ["--out", os.path.join(work, "results")]
                if s == "opengauss_bench.py":
                    args += ["--out", os.path.join(work, "results", "opengauss.json")]
            print(f"== {s} {' '.join(args)}", flush=True)
            res = subprocess.run([sys.executable, path, *args], env=env, cwd=root)
            if res.returncode != 0:
                failed.append(f"{s} (exit {res.returncode})")
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
    if failed:
        raise CliError(f"benchmark failed: {', '.join(failed)}")
    return 0
