"""Helpers for tests, the demo, notebooks and benchmarks: throwaway PostgreSQL servers
(:mod:`.pgserver`), a standalone Spark cluster (:mod:`.sparkcluster`), and :func:`best`, the
one timing rule of the benchmarks in bench/: the best of ``repeat`` runs after a warm-up run
(caches, touched memory), so a figure is the code's, not the first touch's."""

from __future__ import annotations

import time

__all__ = ["best"]


def best(fn, repeat: int, warmup: bool = True) -> float:
    """Seconds of the fastest of ``repeat`` calls of ``fn()``."""
    if warmup:
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)
