"""Wall time of the full default ``crossmetric benchmark`` run (target: < 5 minutes, 2 cores).

Runs ``python -m crossmetric benchmark [extra args]`` in a subprocess (``--out`` in a
temporary folder unless given), then prints the benchmark's own table followed by a JSON line
with the wall time, the peak RSS of the command and its children, the files written and
whether the 300 s target is met.

Usage: ``python benchmarks/bench_cli.py [-- extra benchmark args]``, e.g.
``python benchmarks/bench_cli.py -- --methods euclidean,pcca``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main() -> None:
    extra = sys.argv[1:]
    if extra and extra[0] == "--":
        extra = extra[1:]
    with tempfile.TemporaryDirectory() as tmp:
        out = tmp
        if "--out" in extra:
            out = extra[extra.index("--out") + 1]
        else:
            extra = [*extra, "--out", tmp]
        env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
        cmd = [sys.executable, "-m", "crossmetric", "benchmark", "--no-progress", *extra]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        wall = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        files = sorted(os.listdir(out)) if os.path.isdir(out) else []
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0 or proc.stderr.strip():
        sys.stdout.write("\n[stderr]\n" + proc.stderr)
    print(json.dumps({"command": " ".join(cmd[1:]), "returncode": proc.returncode,
                      "wall_seconds": round(wall, 1), "peak_rss_mb_largest_child": round(peak),
                      "files": files, "cpu_count": os.cpu_count(),
                      "meets_5_minute_target": wall < 300}))


if __name__ == "__main__":
    main()
