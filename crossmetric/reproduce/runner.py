"""The named reproductions, their figures and :func:`run_reproduction`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from crossmetric.reproduce.cmml_cufs import (
    CMML_CUFS_METHODS,
    cmml_cufs_figures,
    reproduce_cmml_cufs,
)
from crossmetric.reproduce.cufs import CML_AUC_CUFS_METHODS, reproduce_cml_auc_cufs
from crossmetric.reproduce.cuhk01 import reproduce_gsm_cuhk01, reproduce_gsm_cuhk01_deep
from crossmetric.reproduce.gsm_cufs import GSM_CUFS_METHODS, reproduce_gsm_cufs
from crossmetric.reproduce.pku import PKU_METHODS, reproduce_pku_sketch
from crossmetric.reproduce.published import PUBLISHED
from crossmetric.reproduce.results import ReproductionResult, default_data_home
from crossmetric.reproduce.viper import (
    reproduce_pcca_viper,
    reproduce_pcca_viper_convergence,
    reproduce_pcca_viper_negatives,
)

__all__ = ["Reproduction", "REPRODUCTIONS", "list_reproductions", "run_reproduction"]



@dataclass(frozen=True)
class Reproduction:
    """One named reproduction, declared once: the command line and :func:`run_reproduction`
    read everything from it.

    Attributes
    ----------
    name : str
        Its name (``crossmetric reproduce NAME``); its published numbers are
        ``PUBLISHED[name]`` (:mod:`crossmetric.reproduce.published`).
    description : str
        One line for ``crossmetric reproduce --list``.
    run : callable
        The experiment: ``run(data_home, *, n_splits, seed, verbose, **options)`` loads the
        paper's data, fits and measures, and returns a :class:`ReproductionResult`.
    default_splits : int
        Splits (or seeds) when none are asked for.
    methods : tuple of str
        The registry names that ``methods=`` (``--methods``) may choose among; empty: the
        reproduction runs a fixed set.
    options : dict
        Command-line options that only this reproduction takes: option (``argparse`` dest)
        -> keyword of ``run``.
    figure : callable or str or None
        ``figure(result, out)`` -> files written, or the title of the CMC figure drawn from
        ``result.extra["cmc"]``; ``None``: no figure.
    """

    name: str
    description: str
    run: Callable
    default_splits: int = 10
    methods: tuple = ()
    options: dict = field(default_factory=dict)
    figure: Callable | str | None = None

    @property
    def published(self) -> dict:
        """The paper's numbers (``PUBLISHED[name]``)."""
        return PUBLISHED[self.name]


def _viper_cmc_figure(result: ReproductionResult, out: str) -> list[str]:
    from crossmetric import plotting

    files = []
    for p in ("p=316", "p=532"):
        curves = {k.split(" ", 1)[1]: np.asarray(v)[:50]
                  for k, v in result.extra.get("cmc", {}).items() if k.startswith(p + " ")}
        if curves:
            path = os.path.join(out, f"cmc_{p.replace('=', '')}.png")
            plotting.plot_cmc(curves, title=f"VIPeR CMC, {p} (PCCA Table 2 / Fig. 5)",
                              path=path)
            files.append(path)
    return files


def _convergence_figure(result: ReproductionResult, out: str) -> list[str]:
    from crossmetric import plotting

    c = next(iter(result.extra["curves"].values()))
    path = os.path.join(out, "convergence.png")
    plotting.plot_convergence({"with preconditioning (K^-1)": c["preconditioned"],
                               "without preconditioning": c["plain"]},
                              title="PCCA-chi2RBF on VIPeR (PCCA Fig. 3)", path=path)
    return [path]


def _negatives_figure(result: ReproductionResult, out: str) -> list[str]:
    from crossmetric import plotting

    fig, ax = plotting._figure()
    for p, c in result.extra["curves"].items():
        ax.errorbar(c["n_negatives"], c["r20"], yerr=c["sem"], marker="o", capsize=3,
                    label=f"p = {p} (ours)")
        pub = PUBLISHED["pcca-viper-negatives"]["rows"]
        pts = [(n, v) for (pp, n), v in pub.items() if pp == p]
        ax.plot([n for n, _ in pts], [v for _, v in pts], "k*", ms=10,
                label=f"p = {p} (paper, Table 2)")
    ax.set_xlabel("negative pairs per person n-")
    ax.set_ylabel("CMC at rank 20 (%)")
    ax.set_title("PCCA-chi2RBF on VIPeR (PCCA Fig. 6)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    path = os.path.join(out, "negatives.png")
    plotting.save_figure(fig, path)
    return [path]


REPRODUCTIONS: dict[str, Reproduction] = {r.name: r for r in [
    Reproduction("pcca-viper", "PCCA Table 2: VIPeR CMC r=1,5,10,20; PCCA-sqrt/-chi2/-chi2RBF "
                 "x n-=1,10, ITML, Euclidean; p=316 and 532", reproduce_pcca_viper,
                 options={"guarded": "guarded"}, figure=_viper_cmc_figure),
    Reproduction("pcca-viper-convergence", "PCCA Fig. 3: kernel PCCA objective per iteration "
                 "with and without preconditioning", reproduce_pcca_viper_convergence, 1,
                 figure=_convergence_figure),
    Reproduction("pcca-viper-negatives", "PCCA Fig. 6: CMC@20 of PCCA-chi2RBF vs n-",
                 reproduce_pcca_viper_negatives, figure=_negatives_figure),
    Reproduction("pku-sketch", "PKU-Sketch: sketch probes vs photos of 50 test persons; CMC "
                 "and mAP for CMML, CML_AUC, GSM, DeepGSM, CCA, KCCA, Euclidean",
                 reproduce_pku_sketch, methods=PKU_METHODS,
                 options={"deepgsm_members": "deepgsm_members", "show_ranks": "show_ranks",
                          "setting": "setting", "descriptor": "descriptor",
                          "guarded": "guarded"},
                 figure="PKU-Sketch: sketch probes vs photos"),
    Reproduction("cml-auc-cufs", "CML-AUC Tables I-II protocol on CUFS (sketch -> photo, dense "
                 "SIFT + PCA, 238 test persons): 1-EER, VR@0.1%, AUC, rank-1 of 15 methods, "
                 "paper grids tuned on training persons; CUFSF numbers as reference",
                 reproduce_cml_auc_cufs, methods=CML_AUC_CUFS_METHODS,
                 options={"guarded": "guarded"},
                 figure="CUFS: sketch probes vs photos (CML-AUC protocol)"),
    Reproduction("gsm-cufs", "GSM Table II protocol on CUFS (train/ 180 persons, test/ 238; "
                 "sketch -> photo CMC): DeepGSM on the images, GSM on dense SIFT + PCA with "
                 "its paper grid tuned on training persons, Euclidean; n_splits = seeds",
                 reproduce_gsm_cufs, 1, methods=GSM_CUFS_METHODS,
                 options={"device": "device", "epochs": "epochs"},
                 figure="CUFS test/: sketch probes vs photos (GSM Table II protocol)"),
    Reproduction("cmml-cufs", "CMML Figs. 6-7 on CUFS: rank-1 and accuracy at EER vs latent "
                 "dimension (CMML, CCA, PLS, CDFE) and vs n- (CMML), dense SIFT + PCA-200",
                 reproduce_cmml_cufs, methods=CMML_CUFS_METHODS, figure=cmml_cufs_figures),
    Reproduction("gsm-cuhk01", "GSM Fig. 6(b): CUHK01 camera A -> B, 871 / 100 persons, "
                 "PatchColorSIFT + PCA-400; GSM generalized vs its special cases and "
                 "ITML, LMNN, KISSME, Euclidean; CMC r=1,5,10,20, paper grids tuned on "
                 "training persons", reproduce_gsm_cuhk01,
                 options={"feature_cache": "cache", "guarded": "guarded"},
                 figure="CUHK01 camera A -> B, hand-crafted features (GSM Fig. 6(b))"),
    Reproduction("gsm-cuhk01-deep", "GSM Fig. 4(b): DeepGSM on the CUHK01 images (device= "
                 "option), beside GSM on the hand-crafted features", reproduce_gsm_cuhk01_deep,
                 options={"device": "device", "feature_cache": "cache"},
                 figure="CUHK01 camera A -> B, DeepGSM (GSM Fig. 4(b))"),
]}


def list_reproductions() -> dict[str, str]:
    """``{name: description}`` of every reproduction."""
    return {k: r.description for k, r in REPRODUCTIONS.items()}


def _figure(result: ReproductionResult, out: str) -> list[str]:
    """The figure files of ``result``, as its reproduction declares them."""
    figure = REPRODUCTIONS[result.name].figure if result.name in REPRODUCTIONS else None
    if callable(figure):
        return figure(result, out)
    if isinstance(figure, str) and result.extra.get("cmc"):
        from crossmetric import plotting

        path = os.path.join(out, "cmc.png")
        plotting.plot_cmc(result.extra["cmc"], title=figure, path=path)
        return [path]
    return []


def run_reproduction(name: str, data_home=None, *, n_splits: int | None = None,
                     out: str | None = None, seed: int = 0, verbose: bool = True,
                     **options) -> ReproductionResult:
    """Run the reproduction ``name`` and (with ``out``) write its CSV, JSON and figure.

    Parameters
    ----------
    name : str
        One of :data:`REPRODUCTIONS`.
    data_home : path, optional
        Folder holding ``viper/`` and ``pku_sketch/``; default :func:`default_data_home`.
    n_splits : int, optional
        Random splits (default: the paper's, 10; 1 for the convergence curves).
    out : path, optional
        Output folder.
    seed : int, default=0
    verbose : bool, default=True
        Print progress lines.
    **options
        Passed to the experiment (e.g. ``ps=(316,)``, ``negatives=(10,)``).
    """
    if name not in REPRODUCTIONS:
        raise ValueError(f"unknown reproduction {name!r}; expected one of "
                         f"{', '.join(REPRODUCTIONS)} (see 'crossmetric reproduce --list').")
    rep = REPRODUCTIONS[name]
    data_home = data_home if data_home is not None else default_data_home()
    if data_home is None:
        raise ValueError("--data-home is required: no ../shared/data folder next to the "
                         "current directory.")
    n_splits = rep.default_splits if n_splits is None else int(n_splits)
    if n_splits < 1:
        raise ValueError(f"n_splits must be >= 1, got {n_splits}.")
    import inspect

    if "n_jobs" in options and "n_jobs" not in inspect.signature(rep.run).parameters:
        options.pop("n_jobs")
    if options.get("methods") is None:
        options.pop("methods", None)
    elif not rep.methods:
        choosing = [r.name for r in REPRODUCTIONS.values() if r.methods]
        choosing = f"{', '.join(choosing[:-1])} and {choosing[-1]}"
        raise ValueError(f"methods: the reproduction {name!r} runs a fixed set of methods; "
                         f"only {choosing} take a choice.")
    t0 = time.perf_counter()
    result = rep.run(data_home, n_splits=n_splits, seed=seed, verbose=verbose, **options)
    result.seconds = time.perf_counter() - t0
    result.extra["n_splits"] = n_splits
    if out is not None:
        result.files = result.write(out) + _figure(result, out) + _rank_lists(result, out)
    return result


def _rank_lists(result: ReproductionResult, out: str) -> list[str]:
    """``ranks.html`` (every method) and ``ranks_<method>.png`` of ``result.rank_lists``."""
    rl = result.rank_lists
    if not rl.get("distances"):
        return []
    import re

    from crossmetric import plotting
    from crossmetric.ranklists import write_rank_html

    n, k = rl["n"], min(10, len(rl["ids_g"]))
    args = (rl["images_q"], rl["images_g"])
    files = [write_rank_html(os.path.join(out, "ranks.html"), *args, rl["distances"],
                             rl["ids_q"], rl["ids_g"], k=k, n_queries=n,
                             title=f"{result.name}: rank lists of split 1 (top {k})")]
    for method, D in rl["distances"].items():
        slug = re.sub(r"[^A-Za-z0-9]+", "_", method).strip("_").lower()
        path = os.path.join(out, f"ranks_{slug}.png")
        plotting.plot_rank_lists(*args, D, rl["ids_q"], rl["ids_g"], k=k, n_queries=n,
                                 title=f"{result.name}, {method}: split 1", path=path)
        files.append(path)
    return files
