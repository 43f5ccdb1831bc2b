"""GSM's sample-based batches on re-id-sized data: drawing the rounds vs the whole fit.

A single-shot re-id training set (``--persons`` identities, one image per camera, as the
``gsm-cuhk01`` reproduction's 871 training persons) gives GSM's identity rounds K̂ = 64
identities × Ô = 2 images a side, so every identity's cycle is shorter than a round's draw and
each draw refills it. The benchmark times (1) ``IdentityRounds.epoch()`` alone and (2) one GSM
fit (generalized, r = 64, ``--dim`` inputs, ``--epochs`` epochs: ``tol=0``, so no plateau stops
it early) on synthetic features with that identity structure, and prints JSON: seconds per
epoch of rounds, seconds of the fit, and the rounds' share of the fit.

    python benchmarks/bench_gsm_rounds.py                # 871 persons, 400 dims, 40 epochs
    python benchmarks/bench_gsm_rounds.py --persons 300 --epochs 20
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import emit, machine  # noqa: E402
from crossmetric._solvers.batches import IdentityRounds  # noqa: E402
from crossmetric.learners.gsm import GSM  # noqa: E402
from crossmetric.pairs import make_pairs  # noqa: E402


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--persons", type=int, default=871)
    ap.add_argument("--dim", type=int, default=400)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3, help="best of this many timings")
    args = ap.parse_args(argv)
    rng = np.random.RandomState(0)
    n, p = args.persons, args.dim
    Z = rng.normal(size=(n, 32))
    X = Z @ rng.normal(size=(32, p)) + rng.normal(size=(n, p))
    Y = Z @ rng.normal(size=(32, p)) + rng.normal(size=(n, p))
    labels = np.arange(n)
    pairs, y = make_pairs(labels, labels, n_negatives=10, random_state=0)

    rounds_s = []
    for _ in range(args.repeat):
        rounds = IdentityRounds(labels, labels, 64, n_images_x=2, n_images_y=2, random_state=0)
        t0 = time.perf_counter()
        for _ in range(args.epochs):
            rounds.epoch()
        rounds_s.append((time.perf_counter() - t0) / args.epochs)

    fit_s = []
    for _ in range(args.repeat):
        est = GSM(n_components=64, max_iter=args.epochs, tol=0.0, joint_reduction=True,
                  random_state=0, preprocessor=(X, Y))
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.fit(pairs, y)
        fit_s.append(time.perf_counter() - t0)
    out = {"persons": n, "dim": p, "epochs": args.epochs,
           "rounds_per_epoch": rounds.rounds_per_epoch,
           "rounds_seconds_per_epoch": round(min(rounds_s), 5),
           "fit_seconds": round(min(fit_s), 3),
           "rounds_share_of_fit": round(min(rounds_s) * args.epochs / min(fit_s), 3),
           "machine": machine()}
    emit(out)
    return out


if __name__ == "__main__":
    main()
