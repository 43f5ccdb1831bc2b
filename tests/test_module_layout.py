"""Code that moved to another module keeps its old import paths, including private names and
monkeypatching through the old module (issue 21: solver layer, one job per module)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

#: old module -> (new module, names that must be the very same objects)
MOVED = {
    "crossmetric.baselines": ("crossmetric._solvers.linalg", [
        "span_basis", "fit_pca", "pca_basis", "cca_directions", "_thin_qr", "_in_span",
        "_from_span", "_REDUCE_TO_SPAN"]),
    "crossmetric.kernels": ("crossmetric.kernels", ["_KernelCoordinatesMixin"]),
    "crossmetric.clml": ("crossmetric._local_metrics", [
        "sparsify_assignments", "_local_embed", "_local_backprop", "_LocalMetricsModel"]),
    "crossmetric.persistence": ("crossmetric._atomic_io", [
        "atomic_path", "atomic_open", "atomic_folder", "write_error", "json_ready", "_umask",
        "_locked", "_remove"]),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_moved_names_are_the_same_objects(old):
    new, names = MOVED[old]
    old_mod, new_mod = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert getattr(old_mod, name) is getattr(new_mod, name), f"{old}.{name}"


def test_baselines_kernel_mixin_and_pair_param_stay():
    from crossmetric import baselines, cmml, kernels
    from crossmetric._checks import per_modality

    assert baselines._KernelCoordinatesMixin is kernels._KernelCoordinatesMixin
    assert baselines._pair_param is per_modality and cmml.per_modality is per_modality
    assert per_modality((1, 2), "gamma") == (1, 2) and per_modality(3, "gamma") == (3, 3)
    with pytest.raises(ValueError, match="gamma must be one value or a pair"):
        per_modality((1, 2, 3), "gamma")


def test_patching_the_span_flag_through_baselines_reaches_the_solver(monkeypatch):
    from crossmetric import baselines
    from crossmetric._solvers import linalg

    V = np.random.RandomState(0).randn(4, 30)
    assert baselines.span_basis(V) is not None
    monkeypatch.setattr(baselines, "_REDUCE_TO_SPAN", False)
    assert linalg._REDUCE_TO_SPAN is False and baselines.span_basis(V) is None
    calls = []
    monkeypatch.setattr(baselines, "_thin_qr", lambda A: calls.append(A.shape) or np.eye(2))
    monkeypatch.setattr(baselines, "_REDUCE_TO_SPAN", True)
    linalg.span_basis(V)
    assert calls == [(30, 4)]
    monkeypatch.undo()
    assert linalg._REDUCE_TO_SPAN is True and linalg._thin_qr is baselines._thin_qr
    assert linalg._thin_qr.__module__ == "crossmetric._solvers.linalg"


#: every name crossmetric/metrics.py defined before it became a package
METRICS_NAMES = [
    "BLOCK_ELEMENTS", "KNN_INDEXES", "TIES", "_CHUNK_BYTES", "_COUNT_MAX_RELEVANT",
    "_LANE_MIN_COLS", "_ap_from_counts", "_area_between", "_block_average_precision",
    "_block_rank_stats", "_block_reid_measures", "_check_distance", "_check_finite_block",
    "_check_fpr_range", "_check_ties", "_check_y_score", "_cmc_from_stats", "_count_flags",
    "_earlier_ties", "_first_run_length", "_gallery_groups", "_groups_for", "_harmonic_diff",
    "_hit_probability", "_label_codes", "_log_comb", "_log_none_in_first", "_nn_hits",
    "_rank_histogram", "_rank_stats", "_relevant", "_relevant_counts", "_rows_less_counts",
    "_rows_per_block", "_self_columns", "_stats_from_counts", "_tie_groups",
    "accuracy_at_median", "average_precision_per_query", "cmc", "eer", "evaluate_rank",
    "identification_report", "knn_accuracy", "knn_rank_report", "mean_average_precision",
    "nearest_neighbor_accuracy", "one_call_at_n", "one_minus_eer", "partial_auc",
    "query_expansion", "rank_accuracy", "re_ranking", "roc", "roc_auc", "verification_rate",
    "verification_report",
]


#: public names added to the package since (class-level retrieval: crossmetric.metrics.retrieval)
METRICS_ADDED = ["mean_average_precision_at_k", "precision_recall_curve_mean",
                 "retrieval_report"]


def test_every_old_metrics_name_is_importable():
    from crossmetric import metrics

    assert not [n for n in METRICS_NAMES + METRICS_ADDED if not hasattr(metrics, n)]
    assert set(metrics.__all__) <= set(METRICS_NAMES) | set(METRICS_ADDED)
    for name in metrics.__all__:
        assert name in dir(metrics)


def test_patching_a_metrics_constant_reaches_the_counting_code(monkeypatch):
    from crossmetric import metrics
    from crossmetric.metrics import _counts, ranking

    D = np.random.default_rng(0).random((5, 3000))   # rows long enough for the lane counter
    ql, gl = np.arange(5), np.arange(3000) % 500     # 6 relevant items per query: counted
    calls = []
    count_flags = _counts._count_flags
    monkeypatch.setattr(metrics, "_count_flags", lambda f: calls.append(f.shape) or
                        count_flags(f))
    assert _counts._count_flags is not count_flags
    want = metrics.mean_average_precision(D, ql, gl)
    assert calls
    monkeypatch.setattr(metrics, "_LANE_MIN_COLS", 10 ** 9)   # switch the lane counter off
    calls.clear()
    assert _counts._LANE_MIN_COLS == 10 ** 9
    assert metrics.mean_average_precision(D, ql, gl) == pytest.approx(want, rel=1e-12)
    assert not calls
    monkeypatch.undo()
    assert _counts._count_flags is count_flags and ranking._rank_stats is metrics._rank_stats


#: every name crossmetric/datasets.py defined or re-exported before it became a package
DATASETS_NAMES = [
    "describe_images", "pair_domains", "image_views",  # added with crossmetric/cli/
    "MAX_IMAGE_PIXELS", "MAX_IMAGE_SIDE",  # added with issue 38 (image size limits)
    "load_market1501", "load_dukemtmc", "load_msmt17", "load_cuhk03", "ImageFiles",
    "REID_SPLITS",  # the re-id benchmarks' folder layouts
    "DIGITS_SIDE", "MFEAT_VIEWS", "TEXT_EXTENSIONS", "_EDGE_SIGMA", "_HEADER_WORDS",
    "_LFW_FILE", "_MFEAT_ROWS", "_SKETCH_SEED", "_digits_views_cached", "_is_number",
    "_parse_image_key", "_read_csv_matrix", "_read_mfeat_view", "_read_text_lines",
    "_sketch_images", "hog_descriptor", "lfw_pair_indices", "load_cufs", "load_cuhk01",
    "load_digits_views", "load_features", "load_image_folder", "load_image_list", "load_labels",
    "load_mfeat", "load_pairs", "load_pku_sketch", "load_viper", "make_cross_modal",
    "read_lfw_pairs",
]


def test_every_old_datasets_name_is_importable(monkeypatch):
    from crossmetric import datasets
    from crossmetric.datasets import files

    assert not [n for n in DATASETS_NAMES if not hasattr(datasets, n)]
    assert set(datasets.__all__) <= set(DATASETS_NAMES)
    monkeypatch.setattr(datasets, "TEXT_EXTENSIONS", (".tsv",))
    assert files.TEXT_EXTENSIONS == (".tsv",)


def test_every_saved_class_path_still_names_its_class():
    """Files name classes by ``module.QualName`` (crossmetric.persistence): each allowed path
    imports, and a class saved today is written under the same path (so that files saved
    before the modules were split load, and files saved now load in older versions)."""
    import importlib.util

    from crossmetric.persistence import ALLOWED_CLASSES, _public_name

    for qual in sorted(ALLOWED_CLASSES):
        module, _, name = qual.rpartition(".")
        if module.startswith("crossmetric.deep") and importlib.util.find_spec("torch") is None:
            continue
        cls = getattr(importlib.import_module(module), name)
        assert isinstance(cls, type) and _public_name(cls) == qual, qual


#: every name crossmetric/baselines.py defined (or took from its helpers) before the split
BASELINES_NAMES = [
    "CCA", "CDFE", "Euclidean", "KCCA", "KCDFE", "KISSME", "KPLS", "KernelCoordinates",
    "LinearTowers", "PLS", "_DISTANCES", "_KernelCoordinatesMixin", "_REDUCE_TO_SPAN",
    "_SklearnLatent", "_check_distance", "_differing", "_from_span", "_in_span",
    "_l2_normalize", "_pair_param", "_positive_samples", "_thin_qr", "cca_directions",
    "fit_pca", "pca_basis", "span_basis",
]


def test_every_old_baselines_name_is_importable(monkeypatch):
    from crossmetric import baselines
    from crossmetric.baselines import _kissme

    assert not [n for n in BASELINES_NAMES if not hasattr(baselines, n)]
    assert set(baselines.__all__) <= set(BASELINES_NAMES)
    sentinel = object()
    monkeypatch.setattr(baselines, "_thin_qr", sentinel)   # KISSME calls it directly too
    assert _kissme._thin_qr is sentinel
