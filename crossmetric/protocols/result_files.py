"""The files of a benchmark result: tables (CSV, JSON, Markdown, LaTeX) and ROC / CMC figures.

``crossmetric benchmark`` writes them into its ``--out`` folder (staged and moved in at once by
:func:`crossmetric.persistence.atomic_folder`, with the resolved ``config.toml`` beside them).
"""

from __future__ import annotations

import os

__all__ = ["RESULT_FILES", "write_result_files"]

#: every file :func:`write_result_files` may write (the figures only for results with curves)
RESULT_FILES = ("results.csv", "results.json", "results.md", "results.tex", "roc.png",
                "cmc.png")


def write_result_files(result, folder, *, description: str = "",
                       top_k: int | None = None) -> list[str]:
    """Write a benchmark result's tables and figures into ``folder``, each file atomically.

    Parameters
    ----------
    result : BenchmarkResult
        As :func:`crossmetric.protocols.run_protocols` returns it.
    folder : str or path-like
        An existing folder.
    description : str, default=""
        The data, used as the LaTeX caption and in the figures' titles (where folders are
        cut to their last component: :func:`crossmetric.plotting.figure_title`).
    top_k : int, optional
        Draw only the best ``top_k`` methods in each figure (by AUC in ``roc.png``, by rank-1
        in ``cmc.png``); the tables keep every method.

    Returns
    -------
    list of str
        The names written, in the order of :data:`RESULT_FILES`: ``results.csv``,
        ``results.json``, ``results.md``, ``results.tex``, then ``roc.png`` where some method
        has a ROC curve (verification; false positive rates 0 to 0.1, log scale, AUC in the
        legend) and ``cmc.png`` where some method has a CMC curve (identification; rank-1 in
        the legend); each method in its own colour and line style
        (:func:`crossmetric.plotting.method_style`) with a band of ±1 std over the folds /
        repeats (``result.curves[m]["roc_std"]`` / ``["cmc_std"]``) when the result has it.

    Examples
    --------
    >>> import tempfile
    >>> from crossmetric import Euclidean
    >>> from crossmetric.datasets import make_cross_modal
    >>> from crossmetric.protocols import run_protocols
    >>> d = make_cross_modal(60, n_classes=6, n_features_x=3, n_features_y=3, random_state=0)
    >>> res = run_protocols({"Euclidean": Euclidean()}, d, protocols=("verification",),
    ...                     n_folds=2)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_result_files(res, folder, description="toy")
    ['results.csv', 'results.json', 'results.md', 'results.tex', 'roc.png']
    """
    from crossmetric.persistence import atomic_open

    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise ValueError(f"folder must be an existing folder, got {folder!r}.")
    rocs = {m: c["roc"] for m, c in result.curves.items() if "roc" in c}
    cmcs = {m: c["cmc"] for m, c in result.curves.items() if "cmc" in c}
    result.to_csv(os.path.join(folder, "results.csv"))
    result.to_json(os.path.join(folder, "results.json"))
    with atomic_open(os.path.join(folder, "results.md"), "w", encoding="utf-8") as fh:
        fh.write(result.to_markdown() + "\n")
    with atomic_open(os.path.join(folder, "results.tex"), "w", encoding="utf-8") as fh:
        fh.write(result.to_latex(caption=description) + "\n")
    written = list(RESULT_FILES[:4])
    if rocs or cmcs:
        from crossmetric.plotting import plot_cmc, plot_roc
    what = f" -- {description}" if description else ""
    if rocs:
        auc = {m: result.value(m, "auc") for m in rocs}
        std = {m: c["roc_std"] for m, c in result.curves.items() if "roc_std" in c}
        plot_roc(rocs, fpr_range=(0.0, 0.1), log_fpr=True, auc=auc, std=std, top_k=top_k,
                 title=f"ROC{what}", path=os.path.join(folder, "roc.png"))
        written.append("roc.png")
    if cmcs:
        rank1 = {m: result.value(m, "rank1") for m in cmcs}
        std = {m: c["cmc_std"] for m, c in result.curves.items() if "cmc_std" in c}
        plot_cmc(cmcs, rank1=rank1, std=std, top_k=top_k, title=f"CMC{what}",
                 path=os.path.join(folder, "cmc.png"))
        written.append("cmc.png")
    return written
