"""'Which method when': every registry learner, with its paper's model selection, on four sets.

Run: ``python benchmarks/which_method_when.py [--datasets viper,pku-sketch,mfeat,digits]
[--methods all|a,b] [--n-splits 3] [--n-jobs -1] [--tune paper|small|none]
[--tune-scoring rank1] [--data-root /work/shared/data] [--out which-method-when]
[--tag NAME] [--merge] [--update SUMMARY ...]``

Prints JSON (one entry per data set and method: rank-1, mAP and AUC mean ± std over the
splits, fit and selection seconds, the settings chosen) and the Markdown table, and writes into
``--out`` (each file atomically): ``<dataset>.json`` (the full
:class:`crossmetric.protocols.BenchmarkResult` of that data set, with this script's protocol in
``info``), ``which_method_when.json`` and ``which_method_when.md``. The summary files cover every
``<dataset>[.<tag>].json`` in ``--out``, so data sets -- and, with ``--tag``, groups of methods
-- can run as separate commands into one folder (the parts of one data set are joined: the
splits depend on ``--seed`` only, so separate calls meet the same splits); ``--merge`` rebuilds
the summary files from those files without fitting anything. ``--update SUMMARY`` (repeatable)
fits nothing either: it replaces the rows of ``--out``'s ``which_method_when.json`` by the rows
of the same methods in a later run's summary on the same splits (same seed, splits, tuning and
protocol; refused otherwise), records which file each replaced row came from (printed under the
table), and rewrites both files. Any run, merge or update ends by naming on stderr the rows
whose recorded grid is not the registry's grid now: the rows to rerun before the table is
current.

Every number comes from :func:`crossmetric.protocols.run_protocols` -- exactly the call of
``crossmetric benchmark --tune paper --tune-scoring rank1`` (the learners from
:func:`crossmetric.registry.make_estimator`, the grids from ``MethodSpec.search_grid``), with
the identification protocol and ``pair_measures=True`` as in ``crossmetric reproduce
cml-auc-cufs``: on each split the test objects' first modality is the probe set, their second
the gallery; rank-1 and mAP from the probe × gallery distances, AUC over every probe × gallery
pair of the same test identities. All methods of one data set run in one call, so they share
its splits (drawn from ``--seed``). Parameters are chosen per split by 3-fold inner
cross-validation on the split's training objects only (grouped by identity on VIPeR and
PKU-Sketch), scored by validation rank-1. No new fit-and-measure loop.

Data sets (:data:`DATASETS`):

* ``viper``: camera A (probe) ↔ camera B (gallery) as the two domains, 632 persons, p = 316
  test persons per split; the ``pcca-viper`` descriptor
  (:class:`crossmetric.features.StripHistograms`, whole vector normalised to unit L1,
  :func:`crossmetric.reproduce.viper.viper_features`), square-rooted, then one PCA-64 fitted on
  the split's training images of both cameras (``pca_joint``), for every feature learner;
  n⁻ = 10, all training positives. DeepGSM: the RGB images scaled to [0, 1].
* ``viper-lomo`` (only by name): the same persons and splits with the LOMO descriptor
  (:class:`crossmetric.features.LOMO`, its defaults, 26,960 features) and a joint PCA-100.
* ``pku-sketch``: sketch (probe) → photo (gallery); the ``pku-sketch`` reproduction's HOG of the
  grey 64 × 160 image (:func:`crossmetric.reproduce.pku.pku_features`) and a joint PCA-64 on the
  training images; 50 test persons per split. Each of the 197 sketches is row-aligned with each
  of its person's two photos (the sketch row twice: every probe counts twice, which leaves CMC,
  mAP and AUC unchanged); the 3 persons without a sketch are left out. n⁻ = 10.
* ``mfeat``: UCI Multiple Features, ``fou`` (76 Fourier coefficients) ↔ ``pix`` (240 pixel
  averages), 10 digit classes; the default ``crossmetric benchmark`` protocol: a stratified 30 %
  of the objects test, n⁻ = 1, at most 1,000 training positives, the registry's PCA only where
  it asks for one (CML_AUC / CML_pAUC: 32), single-modal learners on CCA views ("-C").
* ``digits``: the embedded two-view digits (:func:`crossmetric.datasets.load_digits_views`,
  photo pixels ↔ sketch HOG), as ``mfeat``; DeepGSM runs on its 16 × 16 images.

DeepGSM runs with the registry's setting (the digits setting; it has no grid) wherever the data
has images; on ``mfeat`` (features only) ``run_protocols`` records it as skipped.
``--deepgsm-device cuda`` trains it on a GPU instead of the registry's CPU (on the CPU one
PKU-Sketch round of 80 RGB 64 × 160 images costs about 0.4 s, so a fit that runs to the
3,000-round cap takes 20 minutes; VIPeR's 128 × 48 rounds about 0.08 s). Nothing here imports
faiss.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's crossmetric
from _common import machine  # noqa: E402

DATASETS = ("viper", "pku-sketch", "mfeat", "digits", "viper-lomo")
#: what a run without --datasets covers (the README table); viper-lomo is asked for by name
DEFAULT_DATASETS = DATASETS[:4]
TITLES = {"viper": "VIPeR cam A → B", "viper-lomo": "VIPeR cam A → B (LOMO)",
          "pku-sketch": "PKU-Sketch sketch → photo",
          "mfeat": "mfeat fou ↔ pix", "digits": "digits photo ↔ sketch"}
DEFAULT_ROOT = "/work/shared/data"
SUMMARY_JSON, TABLE_MD = "which_method_when.json", "which_method_when.md"
#: test identities per split (VIPeR: the PCCA paper's p = 316; PKU: Pang et al.'s 50)
N_TEST = {"viper": 316, "viper-lomo": 316, "pku-sketch": 50}
#: joint PCA of the image descriptors, for every feature learner
PCA_DIMS = {"viper": 64, "viper-lomo": 100, "pku-sketch": 64}
N_NEGATIVES = {"viper": 10, "viper-lomo": 10, "pku-sketch": 10}


# ----------------------------------------------------------------------------- data
def _camera_rows(ids, dom) -> tuple[np.ndarray, np.ndarray]:
    """VIPeR's camera A and camera B rows, both in person order."""
    ids, dom = np.asarray(ids), np.asarray(dom)
    a, b = np.flatnonzero(dom == 1), np.flatnonzero(dom == 2)
    a, b = a[np.argsort(ids[a], kind="stable")], b[np.argsort(ids[b], kind="stable")]
    if not np.array_equal(ids[a], ids[b]):
        raise ValueError("VIPeR: every person needs one image from each camera.")
    return a, b


def _viper(root: str, images: bool) -> tuple[dict, str]:
    from crossmetric.reproduce.viper import viper_features

    d = viper_features(root)
    ids = np.asarray(d["ids"])
    a, b = _camera_rows(ids, d["domains"])
    X = np.sqrt(d["X"])
    data = {"X": X[a], "Y": X[b], "labels": ids[a]}
    if images:
        from crossmetric.datasets import load_viper

        img = load_viper(root).images.astype(np.float32) / 255.0   # same row order
        data["images_x"], data["images_y"] = img[a], img[b]
    return data, (f"VIPeR camera A → B, {a.size} persons, sqrt StripHistograms "
                  f"({X.shape[1]} features), joint PCA-{PCA_DIMS['viper']}")


def _viper_lomo(root: str, images: bool) -> tuple[dict, str]:
    from crossmetric.datasets import load_viper
    from crossmetric.features._lomo import LOMO

    b_ = load_viper(root)
    ids = np.asarray(b_.ids)
    a, b = _camera_rows(ids, b_.domains)
    X = LOMO().fit_transform(b_.images)
    data = {"X": X[a], "Y": X[b], "labels": ids[a]}
    if images:
        img = b_.images.astype(np.float32) / 255.0
        data["images_x"], data["images_y"] = img[a], img[b]
    return data, (f"VIPeR camera A → B, {a.size} persons, LOMO ({X.shape[1]} features), "
                  f"joint PCA-{PCA_DIMS['viper-lomo']}")


def _pku(root: str, images: bool) -> tuple[dict, str]:
    from crossmetric.reproduce.pku import pku_features

    d = pku_features(root)
    H, ids, dom = d["H"], np.asarray(d["ids"]), np.asarray(d["domains"])
    rx, ry = [], []
    for s in np.flatnonzero(dom == "sketch"):
        for p in np.flatnonzero((dom == "photo") & (ids == ids[s])):
            rx.append(s)
            ry.append(p)
    rx, ry = np.asarray(rx), np.asarray(ry)
    data = {"X": H[rx], "Y": H[ry], "labels": ids[rx]}
    if images:
        img = np.asarray(d["images"], dtype=np.float32) / 255.0
        data["images_x"], data["images_y"] = img[rx], img[ry]
    return data, (f"PKU-Sketch sketch → photo, {np.unique(ids[rx]).size} persons ({rx.size} "
                  f"sketch-photo rows), HOG ({H.shape[1]} features), joint "
                  f"PCA-{PCA_DIMS['pku-sketch']}")


def _mfeat(root: str, images: bool) -> tuple[dict, str]:
    from crossmetric.datasets import load_mfeat

    home = os.path.join(root, "mfeat")
    b = load_mfeat(home if os.path.isdir(home) else root, ("fou", "pix"))
    return {"X": b.X, "Y": b.Y, "labels": b.labels}, "mfeat fou ↔ pix, 2,000 objects, 10 classes"


def _digits(root: str, images: bool) -> tuple[dict, str]:
    from crossmetric.datasets import load_digits_views

    b = load_digits_views()
    data = {"X": b.X, "Y": b.Y, "labels": b.labels}
    if images:
        data["images_x"], data["images_y"] = b.images_x, b.images_y
    return data, "digits photo pixels ↔ sketch HOG (embedded), 1,797 objects, 10 classes"


LOADERS = {"viper": _viper, "pku-sketch": _pku, "mfeat": _mfeat, "digits": _digits,
           "viper-lomo": _viper_lomo}


def load_dataset(name: str, root: str, *, images: bool = True) -> tuple[dict, str]:
    """``(dataset for run_protocols, description)`` of one of :data:`DATASETS`."""
    if name not in LOADERS:
        raise ValueError(f"dataset must be one of {', '.join(DATASETS)}, got {name!r}.")
    return LOADERS[name](root, images)


def protocol_options(name: str, methods) -> dict:
    """The ``run_protocols`` arguments of one data set (see the module docstring)."""
    from crossmetric.registry import METHODS

    if name in N_TEST:
        return {"test_size": N_TEST[name], "n_negatives": N_NEGATIVES[name],
                "max_train_positives": None, "pca_components": PCA_DIMS[name],
                "pca_joint": True}
    # crossmetric benchmark's defaults (run_protocols' own) and the registry's PCA
    return {"pca_components": {METHODS[m].display: METHODS[m].pca_components for m in methods
                               if METHODS[m].pca_components is not None}}


# ------------------------------------------------------------------------------ run
def run_dataset(name: str, root: str, methods, *, n_splits: int, tune: str | None,
                tune_scoring: str, n_jobs, seed: int, progress: bool = False,
                deepgsm_device: str | None = None):
    """Every method on one data set in one :func:`run_protocols` call; a BenchmarkResult.

    ``deepgsm_device`` replaces the registry's ``device="cpu"`` of DeepGSM (e.g. ``"cuda"``);
    every other setting is the registry's."""
    from crossmetric.protocols import run_protocols
    from crossmetric.registry import METHODS, make_estimator

    data, description = load_dataset(name, root, images="deepgsm" in methods)
    estimators, grids = {}, {}
    for m in methods:
        spec = METHODS[m]
        over = {"device": deepgsm_device} if m == "deepgsm" and deepgsm_device else {}
        estimators[spec.display] = make_estimator(m, **over)
        grid = spec.search_grid(tune) if tune else None
        if grid:
            grids[spec.display] = grid
    # as `crossmetric benchmark`: a registry n_components above the narrowest view is capped
    from crossmetric.protocols.views import cap_n_components_to_views

    for note in cap_n_components_to_views(estimators, data["X"], data.get("Y")):
        print(note, file=sys.stderr)
    opts = protocol_options(name, methods)
    t0 = time.perf_counter()
    res = run_protocols(estimators, data, protocols=("identification",), n_repeats=n_splits,
                        max_rank=20, fpr=1e-3, pair_measures=True, random_state=seed,
                        n_jobs=n_jobs, on_error="record", progress=progress,
                        param_grids=grids or None, tune_scoring=tune_scoring, **opts)
    res.info.update({
        "dataset": name, "description": description, "seconds": time.perf_counter() - t0,
        "seed": seed, "n_splits": n_splits, "tune": tune or "none",
        "tune_scoring": tune_scoring if tune else None,
        "protocol_options": {k: v for k, v in opts.items()},
        "registry_names": {METHODS[m].display: m for m in methods},
        "deepgsm_device": (deepgsm_device or METHODS["deepgsm"].params.get("device"))
        if "deepgsm" in methods else None,
        "machine": machine(), "faiss_imported": sys.modules.get("faiss") is not None})
    return res


# -------------------------------------------------------------------------- summary
def summarise(res) -> list[dict]:
    """One row per method of a BenchmarkResult: measures (mean, std), seconds, choices."""
    by = {(r["method"], r["measure"]): r for r in res.summary}
    rows = []
    for meth in res.methods:
        if meth in res.errors:
            rows.append({"method": meth, "error": res.errors[meth]})
            continue
        row: dict = {"method": meth}
        for key in ("rank1", "map", "auc", "fit_seconds"):
            r = by.get((meth, key))
            row[key] = None if r is None else {"mean": r["mean"], "std": r["std"], "n": r["n"]}
        runs = res.info.get("tuned", {}).get(meth, [])
        row["chosen"] = choices_text([r["params"] for r in runs]) if runs else None
        row["tune_seconds"] = float(np.mean([r["seconds"] for r in runs])) if runs else None
        row["warnings"] = res.warnings.get(meth, {})
        rows.append(row)
    return rows


def choices_text(choices: list[dict]) -> str:
    """``name=value (k/n)`` per parameter, every value chosen on some split, most frequent
    first (ties in the order the splits chose them): deterministic, and a split vote shows."""
    n = len(choices)
    parts = []
    for name in sorted({k for c in choices for k in c}):
        vals = [repr(c.get(name)) for c in choices]
        order = sorted(dict.fromkeys(vals), key=lambda v: -vals.count(v))
        parts.append(f"{name}=" + " or ".join(f"{v} ({vals.count(v)}/{n})" for v in order))
    return ", ".join(parts)


def _cell(v, scale: float, digits: int) -> str:
    return "–" if v is None else f"{scale * v['mean']:.{digits}f} ± {scale * v['std']:.{digits}f}"


def overview(summary: dict) -> str:
    """Rank-1 % / mAP % of every method (rows) on every data set (columns), best in bold;
    ``summary`` as :func:`summaries` gives it."""
    names = [d for d in DATASETS if d in summary]
    cells: dict[str, dict] = {}
    best = {}
    for d in names:
        rows = [r for r in summary[d]["methods"] if "error" not in r and r["rank1"]]
        best[d] = (max(r["rank1"]["mean"] for r in rows) if rows else None,
                   max(r["map"]["mean"] for r in rows) if rows else None)
        for r in rows:
            cells.setdefault(_base(r["method"]), {})[d] = r
    lines = ["| method | " + " | ".join(f"{TITLES[d]}: rank-1 / mAP %" for d in names) + " |",
             "|---|" + "---:|" * len(names)]
    for base, by in cells.items():
        out = []
        for d in names:
            r = by.get(d)
            if r is None:
                out.append("–")
                continue
            r1, ap = 100 * r["rank1"]["mean"], 100 * r["map"]["mean"]
            t1 = f"**{r1:.1f}**" if r["rank1"]["mean"] == best[d][0] else f"{r1:.1f}"
            t2 = f"**{ap:.1f}**" if r["map"]["mean"] == best[d][1] else f"{ap:.1f}"
            out.append(f"{t1} / {t2}")
        lines.append(f"| {base} | " + " | ".join(out) + " |")
    return "\n".join(lines) + "\n"


def markdown(summary: dict) -> str:
    """The overview and the full table over every data set of ``summary`` (name -> that data
    set's entry of :func:`summaries`)."""
    names = [d for d in DATASETS if d in summary]
    lines = [overview(summary)]
    first = summary[names[0]]["info"]
    tune = first.get("tune", "none")
    lines.append(f"Rank-1 %, mAP % and AUC (over every probe × gallery pair of the test "
                 f"identities) as mean ± std over {first.get('n_splits')} splits (seed "
                 f"{first.get('seed')}); parameters chosen on each split "
                 + (f"from the `--tune {tune}` grids by 3-fold inner cross-validation on the "
                    f"split's training objects only, scored by validation "
                    f"{first.get('tune_scoring')}" if tune != "none"
                    else "nowhere (registry settings)")
                 + "; fit s = the final fit, select s = the selection before it (mean per "
                   "split, wall seconds in one worker). Best per data set in bold.")
    lines.append("")
    lines.append("| data | method | rank-1 % | mAP % | AUC | fit s | select s | settings chosen |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---|")
    notes = []
    for d in names:
        entry = summary[d]
        rows = [r for r in entry["methods"] if "error" not in r]
        rows.sort(key=lambda r: -(r["rank1"]["mean"] if r["rank1"] else -1))
        best = {k: max((r[k]["mean"] for r in rows if r[k]), default=None)
                for k in ("rank1", "map", "auc")}
        for r in rows:
            cells = []
            for k, scale, dig in (("rank1", 100, 1), ("map", 100, 1), ("auc", 1, 3)):
                t = _cell(r[k], scale, dig)
                cells.append(f"**{t}**" if r[k] and r[k]["mean"] == best[k] else t)
            fit = "–" if r["fit_seconds"] is None else f"{r['fit_seconds']['mean']:.2f}"
            sel = "–" if r["tune_seconds"] is None else f"{r['tune_seconds']:.1f}"
            chosen = r["chosen"] or "registry settings (no grid)"
            warn = "; " + ", ".join(f"{k} in {v} fits" for k, v in r["warnings"].items()) \
                if r["warnings"] else ""
            lines.append(f"| {TITLES[d]} | {r['method']} | " + " | ".join(cells)
                         + f" | {fit} | {sel} | {chosen}{warn} |")
        for m, why in entry["skipped"].items():
            notes.append(f"{TITLES[d]}: {m} skipped ({why}).")
        for m, why in entry["errors"].items():
            notes.append(f"{TITLES[d]}: {m} failed ({' '.join(str(why).split())[:200]}).")
    lines.append("")
    for d in names:
        info = summary[d]["info"]
        group = (info.get("tuning") or {}).get("group")
        lines.append(f"* {TITLES[d]}: {summary[d].get('description')}; "
                     f"{_protocol_text(info.get('protocol_options', {}))}; "
                     f"{info.get('n_splits')} splits, --tune {info.get('tune')}"
                     + (f" (inner folds by {group})" if group else "") + "; "
                     f"{info.get('seconds', 0):.0f} s wall for the data set "
                     f"({info.get('machine', {}).get('cpus')} CPUs, load "
                     f"{info.get('machine', {}).get('load_avg_1min')} at the end)"
                     + _sources_text(info.get("row_sources")) + ".")
    if any(r["method"].endswith("-C") for e in summary.values() for r in e["methods"]):
        lines.append("* NAME-C: a single-modal learner on views of different widths, run on "
                     "CCA views (32 dims, fitted on the training pairs), as the CML-AUC "
                     "paper's -C rows and `crossmetric benchmark`.")
    lines += [f"* {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _sources_text(sources: dict | None) -> str:
    """``; A, B from the later run `FILE` (same splits)`` per file that replaced rows
    (:func:`update_rows`)."""
    by_file: dict[str, list[str]] = {}
    for method, src in (sources or {}).items():
        by_file.setdefault(src, []).append(method)
    return "".join(f"; {', '.join(ms)} from the later run `{src}` (same splits)"
                   for src, ms in by_file.items())


def _protocol_text(opts: dict) -> str:
    if "test_size" in opts:
        return (f"{opts['test_size']} test identities per split, n⁻ = {opts['n_negatives']}, "
                f"every training positive")
    pca = ", ".join(f"{m} PCA-{k}" for m, k in opts.get("pca_components", {}).items())
    return ("30 % of the objects test (stratified), n⁻ = 1, ≤ 1,000 training positives "
            "(the `crossmetric benchmark` defaults)" + (f"; {pca}" if pca else ""))


def summaries(results: dict) -> dict:
    """The JSON summary of every data set (name -> BenchmarkResult): description, run
    settings, skipped / failed methods and one :func:`summarise` row per method."""
    from crossmetric.persistence import json_ready

    return json_ready({d: {"description": r.info.get("description"), "info": {
        k: r.info.get(k) for k in ("n_splits", "seed", "tune", "tune_scoring",
                                   "protocol_options", "seconds", "machine",
                                   "faiss_imported", "deepgsm_device", "tuning")},
        "skipped": r.skipped, "errors": r.errors, "methods": summarise(r)}
        for d, r in results.items()})


def write_summary(summary: dict, out: str) -> dict:
    """``which_method_when.json`` and ``.md`` of ``summary`` in ``out`` (atomically)."""
    from crossmetric.persistence import atomic_open

    table = markdown(summary)
    os.makedirs(out, exist_ok=True)
    with atomic_open(os.path.join(out, SUMMARY_JSON), "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=1)
    with atomic_open(os.path.join(out, TABLE_MD), "w", encoding="utf-8") as fh:
        fh.write(table)
    return {"summary": summary, "table": table}


def write_outputs(results: dict, out: str) -> dict:
    """``which_method_when.json`` and ``.md`` of BenchmarkResults in ``out``; the JSON."""
    return write_summary(summaries(results), out)


def update_rows(base: dict, later: dict, source: str) -> list[str]:
    """Replace ``base``'s rows by the rows of the same methods in ``later`` (both
    :func:`summaries` dicts), data set by data set, in place; the replaced "data/method" names.

    A later run of some methods on the same data sets and splits (the runs' ``n_splits``,
    ``seed``, ``tune``, ``tune_scoring`` and protocol options must agree: the splits depend on
    them only) brings their rows up to date without refitting the others. Each replaced row's
    file is kept in ``info["row_sources"]`` and its grid in ``info["tuning"]["grids"]``.
    """
    replaced = []
    for d, entry in later.items():
        if d not in base:
            raise ValueError(f"{source}: data set {d!r} is not in the table it updates.")
        old, new = base[d]["info"], entry["info"]
        for k in _SAME + ("protocol_options",):
            a, b = _split_settings(new, k), _split_settings(old, k)
            if a != b:
                raise ValueError(f"{source}: {d}: {k} is {a!r} there and {b!r} in the "
                                 f"table: not the same splits.")
        _join_pca(old, new)
        rows = {r["method"]: r for r in entry["methods"]}
        base[d]["methods"] = [rows.pop(r["method"], r) for r in base[d]["methods"]]
        base[d]["methods"] += list(rows.values())
        for m in (r["method"] for r in entry["methods"]):
            old.setdefault("row_sources", {})[m] = source
            grid = ((new.get("tuning") or {}).get("grids") or {}).get(_base(m))
            if old.get("tuning") and grid is not None:
                old["tuning"].setdefault("grids", {})[_base(m)] = grid
            base[d]["skipped"].pop(m, None)
            base[d]["errors"].pop(m, None)
            replaced.append(f"{d}/{m}")
        base[d]["skipped"].update(entry["skipped"])
        base[d]["errors"].update(entry["errors"])
    return replaced


def _base(method: str) -> str:
    """A table row's learner: ``NAME`` of ``NAME-C`` (the grids are recorded per learner)."""
    return method[:-2] if method.endswith("-C") else method


def _split_settings(info: dict, key: str):
    """``info[key]``, without the per-method PCA dimensions (a dict), which vary with the
    methods of a run and not its splits."""
    value = info.get(key)
    if key == "protocol_options" and isinstance((value or {}).get("pca_components"), dict):
        value = {k: v for k, v in value.items() if k != "pca_components"}
    return value


def stale_rows(summary: dict) -> list[str]:
    """"data/method" of every row whose recorded grid is not the registry's grid now (a row
    to rerun before the table is current)."""
    from crossmetric.persistence import json_ready
    from crossmetric.registry import METHODS

    names = {spec.display: key for key, spec in METHODS.items()}
    out = []
    for d, entry in summary.items():
        info = entry["info"]
        if info.get("tune") in (None, "none"):
            continue
        grids = (info.get("tuning") or {}).get("grids") or {}
        for r in entry["methods"]:
            key = names.get(_base(r["method"]))
            if key is None:
                continue
            now = json.loads(json.dumps(json_ready(METHODS[key].search_grid(info["tune"]))))
            if (grids.get(_base(r["method"])) or None) != (now or None):
                out.append(f"{d}/{r['method']}")
    return out


def _result_files(out: str, name: str) -> list[str]:
    """``<name>.json`` and every ``<name>.<tag>.json`` in ``out``, sorted."""
    if not os.path.isdir(out):
        return []
    return sorted(os.path.join(out, f) for f in os.listdir(out)
                  if f == f"{name}.json" or (f.startswith(f"{name}.") and f.endswith(".json")
                                              and f.count(".") == 2))


#: run settings that must agree before two parts of one data set are joined
_SAME = ("n_splits", "seed", "tune", "tune_scoring")


def combine(parts: list):
    """One BenchmarkResult from runs of different methods on the same data set and settings.

    The splits (and the seed each split hands a learner) are drawn from the seed before any
    method-specific work (:func:`crossmetric.protocols.run_protocols`), so methods run in
    separate calls -- separate commands, ``--tag`` -- meet exactly the splits of one call.
    """
    base = parts[0]
    for p in parts[1:]:
        for k in _SAME:
            if p.info.get(k) != base.info.get(k):
                raise ValueError(f"cannot join results of {base.info.get('dataset')!r}: "
                                 f"{k} is {base.info.get(k)!r} in one part and "
                                 f"{p.info.get(k)!r} in another.")
        new = [m for m in p.methods if m not in base.methods]
        base.methods += new
        base.summary += [r for r in p.summary if r["method"] in new]
        base.records += [r for r in p.records if r["method"] in new]
        for attr in ("curves", "skipped", "errors", "warnings"):
            getattr(base, attr).update({m: v for m, v in getattr(p, attr).items()
                                        if m in new or m not in base.methods})
        for key in ("tuned", "registry_names"):
            base.info.setdefault(key, {}).update(p.info.get(key) or {})
        if p.info.get("tuning"):
            grids = base.info.setdefault("tuning", dict(p.info["tuning"], grids={}))
            grids["grids"].update(p.info["tuning"].get("grids", {}))
        base.info["seconds"] = base.info.get("seconds", 0) + p.info.get("seconds", 0)
        _join_pca(base.info, p.info)
    return base


def _join_pca(info: dict, other: dict) -> None:
    """Add ``other``'s per-method PCA dimensions (a dict; a run's methods decide it) to
    ``info``'s, in place."""
    pca = (other.get("protocol_options") or {}).get("pca_components")
    if isinstance(pca, dict):
        info["protocol_options"]["pca_components"].update(pca)


def load_results(out: str) -> dict:
    """Every ``<dataset>[.<tag>].json`` already in ``out``, the parts of one data set joined
    (:func:`combine`); name -> BenchmarkResult."""
    from crossmetric.protocols import BenchmarkResult

    found = {}
    for d in DATASETS:
        files = _result_files(out, d)
        if files:
            found[d] = combine([BenchmarkResult.load(f) for f in files])
    return found


# ------------------------------------------------------------------------------ CLI
def _names(text: str, allowed, what: str) -> list[str]:
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        raise SystemExit(f"error: --{what}: unknown {bad or text!r}; expected some of "
                         f"{', '.join(allowed)}.")
    return names


def main(argv=None) -> dict:
    from crossmetric.registry import METHODS, method_status

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=",".join(DEFAULT_DATASETS),
                    help=f"some of {','.join(DATASETS)} (default: the first four)")
    ap.add_argument("--methods", default="all",
                    help="registry names, comma-separated, or 'all' (every registry learner)")
    ap.add_argument("--n-splits", type=int, default=3)
    ap.add_argument("--n-jobs", type=int, default=-1,
                    help="joblib workers over the (method, split) fits (default: all cores)")
    ap.add_argument("--dask-workers", type=int, default=None,
                    help="run the fits on a local Dask cluster of this many processes instead")
    ap.add_argument("--deepgsm-device", default=None,
                    help="torch device of DeepGSM instead of the registry's 'cpu' (e.g. cuda)")
    ap.add_argument("--tune", choices=("paper", "small", "none"), default="paper")
    ap.add_argument("--tune-scoring", choices=("rank1", "map", "auc"), default="rank1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-root", default=DEFAULT_ROOT,
                    help="folder holding viper/, pku_sketch/ and mfeat/ (digits is embedded)")
    ap.add_argument("--out", default="which-method-when")
    ap.add_argument("--tag", default=None,
                    help="write <dataset>.<TAG>.json instead of <dataset>.json, so that method "
                         "groups run as separate commands join in one --out (letters, digits, "
                         "- and _)")
    ap.add_argument("--merge", action="store_true",
                    help="fit nothing: rebuild the summary files from the <dataset>[.<tag>].json "
                         "files in --out")
    ap.add_argument("--update", action="append", default=[], metavar="SUMMARY",
                    help="fit nothing: replace the rows of --out's which_method_when.json by "
                         "those of a later run's which_method_when.json (a file or its folder) "
                         "on the same splits; repeatable, later ones win")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.update:
        return _update(args.out, args.update)
    if args.n_splits < 2 and not args.merge:
        # one split is allowed for smoke runs; std is then 0
        print("which_method_when: note: 1 split gives no spread", file=sys.stderr)
    if args.n_splits < 1:
        raise SystemExit("error: --n-splits must be >= 1.")
    if args.tag is not None and not re.fullmatch(r"[A-Za-z0-9_-]+", args.tag):
        raise SystemExit(f"error: --tag must be letters, digits, - and _, got {args.tag!r}.")

    if not args.merge:
        datasets = _names(args.datasets, DATASETS, "datasets")
        methods = list(METHODS) if args.methods.strip().lower() == "all" else \
            _names(args.methods, list(METHODS), "methods")
        unavailable = {m: method_status(m) for m in methods if method_status(m)}
        for m, why in unavailable.items():
            print(f"which_method_when: skipping {m}: {why}", file=sys.stderr)
        methods = [m for m in methods if m not in unavailable]
        backend = contextlib.ExitStack()
        if args.dask_workers:
            from crossmetric.cluster import dask_backend

            backend.enter_context(dask_backend(None, n_workers=args.dask_workers))
        with backend:
            for d in datasets:
                print(f"which_method_when: {d}: {len(methods)} methods x {args.n_splits} "
                      f"splits, --tune {args.tune}", file=sys.stderr, flush=True)
                res = run_dataset(d, args.data_root, methods, n_splits=args.n_splits,
                                  tune=None if args.tune == "none" else args.tune,
                                  tune_scoring=args.tune_scoring, n_jobs=args.n_jobs,
                                  seed=args.seed, progress=not args.quiet,
                                  deepgsm_device=args.deepgsm_device)
                os.makedirs(args.out, exist_ok=True)
                stem = d if args.tag is None else f"{d}.{args.tag}"
                res.to_json(os.path.join(args.out, f"{stem}.json"))
                print(f"which_method_when: {d} done in {res.info['seconds']:.0f} s",
                      file=sys.stderr, flush=True)
    # the table covers every data set (and method group) in --out, this run's and earlier ones
    try:
        results = load_results(args.out)
    except ValueError as exc:
        raise SystemExit(f"error: --out: {exc}") from None
    if not results:
        raise SystemExit(f"error: --merge: no <dataset>.json in {args.out!r}.")
    written = write_outputs(results, args.out)
    print(json.dumps(written["summary"], indent=1))
    print(written["table"])
    _warn_stale(written["summary"])
    return written


def _read_summary(path: str) -> dict:
    file = os.path.join(path, SUMMARY_JSON) if os.path.isdir(path) else path
    try:
        with open(file, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: cannot read a summary from {path!r}: {exc}") from None


def _update(out: str, sources: list[str]) -> dict:
    """``--update``: the table in ``out`` with its rows replaced by later runs' rows."""
    summary = _read_summary(out)
    for src in sources:
        try:
            replaced = update_rows(summary, _read_summary(src), src)
        except ValueError as exc:
            raise SystemExit(f"error: --update: {exc}") from None
        print(f"which_method_when: {len(replaced)} rows from {src}", file=sys.stderr)
    written = write_summary(summary, out)
    print(written["table"])
    _warn_stale(summary)
    return written


def _warn_stale(summary: dict) -> None:
    stale = stale_rows(summary)
    if stale:
        print("which_method_when: selected from another grid than the registry's now (rerun "
              "them): " + ", ".join(stale), file=sys.stderr)


if __name__ == "__main__":
    main()
