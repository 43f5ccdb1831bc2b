"""Method names of the command line → learners with benchmark-suitable settings.

``crossmetric benchmark --methods pcca,cmml`` and ``crossmetric fit METHOD`` look names up
here. Learner classes are imported on first use through ``crossmetric.<ClassName>`` (so the
registry itself imports no learner module, and ``deepgsm`` pulls in PyTorch only when asked for).

The settings are those of the papers where the papers give them. No schedule is shorter than the
method needs: every iterative learner of the default benchmark stops on its
own convergence rule before its ``max_iter`` cap (no ``ConvergenceWarning``); CML_AUC, CML_pAUC
and Maha_AUC run Algorithm 1 with its defaults (all pairs in every batch, as the paper's
s1 = s2 = 1), which converge in about 50 iterations since the solver whitens its inputs. DeepGSM,
a mini-batch learner, runs the ``"plateau"`` schedule of :mod:`crossmetric.deep.schedule`: it
stops when its windowed batch objective stops decreasing even at 1/100 of its learning rate (an
iteration count, never a time limit, so that a seeded benchmark gives the same numbers on any
machine).
The settings are listed in :data:`METHODS` and shown by ``crossmetric benchmark --list``, with
the small grid that ``crossmetric benchmark --tune`` searches per method
(:mod:`crossmetric.protocols.model_selection`).

A method whose module or class is missing from the installation is reported by
:func:`method_status` with the reason (``ModuleNotFoundError`` of the learner module itself, or
a class not defined there); any other import failure -- a broken dependency, a syntax error --
propagates from :func:`make_estimator` instead of being hidden.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crossmetric.learners._auto_grids import CDFE_REG_GRID

if TYPE_CHECKING:
    from sklearn.base import BaseEstimator

__all__ = ["MethodSpec", "METHODS", "WRAPPERS", "public_classes", "make_estimator",
           "guarded_estimator",
           "available_class", "method_status", "available_methods", "select_methods",
           "method_kind", "StageIf", "CDFE_REG_GRID", "GSM_PAPER_GRID", "gsm_paper_grid",
           "CMML_START_STAGE", "CMML_TUNE_START_STAGE"]


class StageIf(dict):
    """One stage's grid that :func:`~crossmetric.protocols.model_selection.search_stages` runs only
    when the parameter ``requires`` is set (not ``None``) on the estimator with the earlier stages'
    choices.

    It is the grid itself (a ``dict``: :class:`~sklearn.model_selection.ParameterGrid`,
    ``json.dumps`` and every other reader see the plain grid), plus the condition. Its use: a
    parameter that does nothing unless another one is set, such as GSM's ``start_mu`` without
    ``start_from``. Every candidate of such a stage would be the same fit, and the scan would
    choose the first of them anyway. Skipping the stage gives the same choice without those
    fits.

    Parameters
    ----------
    requires : str
        The parameter that must be set for the stage to run.
    grid : mapping
        The stage's grid, as for :func:`~crossmetric.protocols.model_selection.search_params`.

    Examples
    --------
    >>> stage = StageIf("start_from", {"start_mu": [None, 1.0]})
    >>> stage.requires, dict(stage), stage
    ('start_from', {'start_mu': [None, 1.0]}, StageIf('start_from', {'start_mu': [None, 1.0]}))
    """

    def __init__(self, requires: str, grid: Mapping):
        if not isinstance(requires, str) or not requires:
            raise ValueError(f"requires must be a parameter name, got {requires!r}.")
        if not isinstance(grid, Mapping):
            raise ValueError(f"grid must be a mapping of parameter lists, got "
                             f"{type(grid).__name__}.")
        super().__init__(grid)
        self.requires = requires

    def __repr__(self) -> str:
        return f"StageIf({self.requires!r}, {dict.__repr__(self)})"

    def __reduce__(self):
        return StageIf, (self.requires, dict(self))

    def applies(self, params: Mapping) -> bool:
        """Whether the stage runs for an estimator with ``params`` (``get_params()``)."""
        return params.get(self.requires) is not None




@dataclass(frozen=True)
class MethodSpec:
    """One command-line method.

    Attributes
    ----------
    name : str
        Lower-case command-line name.
    display : str
        Name in result tables (the papers' spelling).
    class_name : str
        The learner class; :mod:`crossmetric` exports it under this name.
    params : dict
        Constructor arguments used by the benchmark (the paper's defaults otherwise).
    note : str
        Why the settings are what they are.
    pca_components : int or None
        The benchmark reduces each view by PCA to this many dimensions before fitting this
        method (as the CML-AUC paper does before its learners, §IV-A); ``None``: raw features.
    grid : dict
        Small hyper-parameter grid searched by ``crossmetric benchmark --tune`` (inner
        cross-validation on each split's training objects,
        :mod:`crossmetric.protocols.model_selection`); empty: nothing to tune (or too costly, see
        the note).
    in_default : bool
        Run by ``crossmetric benchmark`` without ``--methods`` (the other methods -- the
        papers' extra baselines -- run when named or with ``--methods all``).
    paper_grid : tuple of dict
        The selection the method's paper describes, searched by ``crossmetric benchmark --tune
        paper`` and by the reproductions: one grid per stage, each stage's winner fixed for
        the next (:func:`crossmetric.protocols.model_selection.search_stages`); empty: ``grid``. The
        papers choose these on training data; here by inner cross-validation on the training
        identities only.
    paper_params : dict
        The paper's own plain run where the benchmark's settings differ (its start, no
        held-out guard, its dimension): what the reproductions fit
        (``make_estimator(name, paper=True)``).
    start_stage : dict or list of dict
        The start as a first stage of ``--tune paper`` (ours, not the paper's): the guarded fit
        from each start, so that the selection keeps the untrained distance or the closed
        form exactly where training does not help on the inner folds (a list: the union of
        its grids' candidates, as a stage of ``paper_grid``).
    module : str
        The public module that defines ``class_name`` (and ``also``): ``import crossmetric``
        loads it on first use, and model files name the classes by it
        (:func:`public_classes`).
    also : tuple of str
        Further public classes of ``module`` that no command-line name of their own runs
        (``RCA_Supervised`` beside ``RCA``, ``CLMLCV`` beside ``CLML``).
    """

    name: str
    display: str
    class_name: str
    params: dict = field(default_factory=dict)
    note: str = ""
    pca_components: int | None = None
    grid: dict = field(default_factory=dict)
    in_default: bool = True
    paper_grid: tuple = ()
    paper_params: dict = field(default_factory=dict)
    start_stage: dict | list = field(default_factory=dict)
    module: str = ""
    also: tuple = ()

    def search_grid(self, which: str = "small", *, with_start: bool = True) -> dict | list:
        """The grid of ``--tune`` (``"small"``) or ``--tune paper`` (``"paper"``: the start
        stage first unless ``with_start=False``, then the paper's selection)."""
        if which not in ("small", "paper"):
            raise ValueError(f"which must be 'small' or 'paper', got {which!r}.")
        if which == "paper" and self.paper_grid:
            start = [self.start_stage] if with_start and self.start_stage else []
            return start + list(self.paper_grid)
        return self.grid


#: The iteration count as a selected parameter (early stopping as regularisation) for the
#: unregularised logistic learners: on CUFS (180 training persons) CMML's rank-1 went from
#: 66.4 % at the plateau to 81.9 % with 20 iterations chosen on the training persons.
ITERATION_STAGE = {"max_iter": [10, 20, 40, 80, 160, 1000]}

#: CML-AUC §V-B: "γ was firstly tuned by fixing μ to a small value 10^-7 and selected from
#: [0.1, 0.5, 1, 1.5, 2, 3, 4, 5]. Then γ was fixed and μ was selected from [10^-3 … 10^-7]".
#: The first stage has one choice of ours beside γ: the preconditioning. Our default whitens
#: each view (fast convergence), which weighs every PCA direction alike -- also the noisy ones
#: of a PCA fitted on a few hundred images; ``standardize="scale"`` keeps the descriptor's own
#: variance weighting, as the paper's raw PCA features do (slower: ``max_iter=1000``).
#: Measured on CUFS's 180 training persons (dense SIFT, joint PCA-100, 3 inner folds by person,
#: rank-1 of the held-out persons, best of this first stage): CML_AUC 0.967 whitened, 0.994
#: scaled (1.0 after the μ stage); CML_pAUC 0.939 and 0.989; Maha_AUC 0.967 and 0.989; the
#: untrained distance 0.90.
_AUC_GAMMAS = [0.1, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0]
CMLAUC_PAPER_GRID = ([{"gamma": _AUC_GAMMAS, "mu": [1e-7]},
                      {"gamma": _AUC_GAMMAS, "mu": [1e-7], "standardize": ["scale"],
                       "max_iter": [1000]}],
                     {"mu": [1e-3, 1e-4, 1e-5, 1e-6, 1e-7]})

#: GSM §5.5 (i): the reduced dimension, then the weight μ of eq. (7). Two candidates of the
#: dimension stage are ours beside the paper's random start. ``init="identity"`` on the views as
#: given (no reduction of GSM's own) starts S at the untrained distance -- meaningful when both
#: views share coordinates (one descriptor, one PCA of both, as every reproduction prepares
#: them), and rejected by the selection where it is not. Measured on CUFS's 180 training persons
#: (dense SIFT, joint PCA-100, 3 inner folds by person, rank-1 of the held-out persons): the
#: paper's candidates reach 0.86 (generalized) and 0.93 (affine Euclidean), the untrained
#: distance 0.90, the identity start 0.98 for both. ``start_from="euclidean"`` (generalized
#: form only, :func:`gsm_paper_grid` drops it for the special cases) fits the affine Euclidean
#: case first and trains the generalized form from it. The μ stage also chooses what μ pulls
#: towards (``penalty``: zero, eq. 7, or the start). Measured with this grid on VIPeR camera
#: A → B (316 training persons, 3 splits, test rank-1 %; ``docs/measurements.md``), before →
#: after the two additions: generalized 20.5 → 25.5 (strip histograms) and 29.0 → 32.5 (LOMO),
#: every split choosing the start from the Euclidean case; affine Euclidean 22.9 → 24.9 and
#: 33.5 → 33.8. A last stage (generalized form only) chooses ``start_mu``, the pull towards the
#: fitted special case while the generalized form trains from it: ``None`` (μ), strong enough
#: to hold it near the special case, or ``"hold"``, the special case itself (the limit), so
#: that the selection can keep the special case's measure where the extra terms do not help
#: held-out persons. Measured on CUHK01 (871 training persons, PatchColorSIFT + joint PCA-400,
#: 3 inner folds, rank-1; the chosen μ = 1e-3 with ``penalty="start"``), start_mu None / 1e-2
#: / 0.1 / 1: 0.383 / 0.405 / 0.413 / 0.418 and 0.406 / 0.410 / 0.423 / 0.427 on two splits,
#: the affine Euclidean case alone 0.418 / 0.427. On the test persons of all 10 ``gsm-cuhk01``
#: splits: generalized 62.7 % rank-1 without ``"hold"`` (``start_mu`` = 1 chosen on 8 splits,
#: 0.1 on 2: -3 and -6 points), 63.2 % with it (chosen on 5 splits), against 64.0 % for the
#: affine Euclidean case fitted on its own; with each one's chosen settings over 5 seeds,
#: 63.34 % for both (``docs/measurements.md``). Where the first stage did not choose
#: ``start_from``, ``start_mu`` does nothing and the stage is skipped (``StageIf``).
GSM_PAPER_GRID = ([{"n_components": [16, 32, 64], "start_from": [None]},
                   {"n_components": [None], "init": ["identity"], "start_from": [None]},
                   {"n_components": [None], "init": ["identity"], "start_from": ["euclidean"]}],
                  {"mu": [1e-5, 1e-4, 1e-3, 1e-2], "penalty": ["zero", "start"]},
                  StageIf("start_from", {"start_mu": [None, 0.1, 1.0, "hold"]}))

#: the parameters that only the generalized form takes (with ``start_from``)
_START_PARAMS = ("start_from", "start_mu")


def gsm_paper_grid(structure: str = "generalized") -> list:
    """GSM's paper grid (``METHODS["gsm"]``, :data:`GSM_PAPER_GRID`) for one ``structure``: the
    special cases without the candidates that start from a special case and without the
    ``start_mu`` stage (``start_from`` needs the generalized form)."""
    stages = METHODS["gsm"].search_grid("paper", with_start=False)
    assert isinstance(stages, list)  # GSM has paper stages (a list), not one grid (a dict)
    if structure == "generalized":
        return stages
    out: list = []
    for stage in stages:
        if isinstance(stage, dict):
            kept = {k: v for k, v in stage.items() if k not in _START_PARAMS}
            out += [kept] if kept else []
        else:  # candidates that start from no special case, that setting dropped
            out.append([{k: v for k, v in c.items() if k not in _START_PARAMS} for c in stage
                        if all(c[k] == [None] for k in set(c) & set(_START_PARAMS))])
    return out


#: CMML's first selection stage: the iteration count (see ITERATION_STAGE) from the paper's
#: random start and, as one more candidate of ours, from ``init="identity"`` (both towers on
#: the first input coordinates: the untrained distance of views in shared coordinates, as every
#: reproduction prepares them with one PCA of both; where the views do not share coordinates
#: the selection rejects it). Measured on CUFS's 180 training persons (dense SIFT, joint
#: PCA-100, 3 inner folds by person, rank-1): random start 0.87 at 30 dimensions (0.92 at
#: 100), identity start 0.94 (0.94); the untrained distance 0.90.
CMML_START_STAGE = [ITERATION_STAGE, {**ITERATION_STAGE, "init": ["identity"]}]

#: The start as a stage of its own (ours): the guarded fit from each start the learner can
#: take, so that the selection keeps the untrained distance or a closed form exactly when
#: training does not help on the training identities' inner folds (``"auto"`` is the default's
#: own choice, on its hold-out and identity folds of its training side). KISSME's start is a
#: candidate of its own too: the selection then compares the trained results of the starts,
#: not only the starts. GSM's stage leaves it to ``"auto"`` (each GSM candidate costs 3 fits
#: of 6-30 s).
TOWER_START_STAGE = {"init": ["auto", "identity", "cca", "kissme", "random"]}
#: CMML's start stage adds its paper's standard form (§3.2: "the kernel formulation [...]
#: should be considered as the standard form of the algorithm"; §4 uses a χ²-RBF kernel on
#: histograms): Gaussian RBF towers on Nyström coordinates of the training samples (exact
#: while they are at most ``n_landmarks``), the bandwidth the scale-free one, the start the
#: guarded ``"auto"`` -- whose closed-form candidates on those coordinates are kernel CCA, so
#: the selection can keep KCCA's solution in CMML's own parametrisation. The Gaussian rather
#: than the χ²-RBF kernel: the views may be any features, not only histograms. Measured on VIPeR
#: camera A ↔ B (square-rooted strips, 316 training persons, 3 splits; rank-1 %): with the
#: defaults otherwise linear 23.0, RBF 36.8 (before the Nyström features were centred 35.1;
#: χ²-RBF 33.5, bandwidth ×0.1 23.9, ×0.3 31.8, ×2 31.6), KCCA 36.8; ``--tune paper
#: --tune-scoring rank1`` 23.0 → 36.8, the RBF candidate chosen on every split (inner rank-1
#: 0.29-0.30 against 0.25-0.26 linear); 450 of its persons 28.4 → 31.4. On CUFS HOG the linear
#: towers stay on every split (inner 0.93-0.95 against 0.90-0.92 for RBF; test rank-1 92.8).
CMML_TUNE_START_STAGE = [TOWER_START_STAGE,
                         {"kernel": ["rbf"], "kernel_approximation": ["nystroem"],
                          "init": ["auto"]}]
PCCA_START_STAGE = {"init": ["auto", "identity", "kissme", "pca"]}
AUC_START_STAGE = {"init": ["auto", "identity", "cca", "kissme", "pca"]}
#: GSM's paper selection (and the reproductions' paper runs) starts from the paper's kind of
#: settings -- 32 PCA dimensions, μ = 1e-4 towards zero (eq. 7), no special case first -- and
#: searches from there (:data:`GSM_PAPER_GRID`); the benchmark's defaults
#: (:data:`GSM_BENCHMARK_PARAMS`) are what that search chose on VIPeR's training identities
GSM_PAPER_SETTINGS = {"n_components": 32, "start_from": None, "penalty": "zero", "mu": 1e-4}
GSM_START_STAGE = {"init": ["auto", "identity", "cca", "random"],
                   **{k: [v] for k, v in GSM_PAPER_SETTINGS.items()}}
#: full width, trained from the fitted Euclidean special case and pulled towards it: on the
#: inner folds of VIPeR's training identities (strips and LOMO, 3 splits each) the paper
#: selection's winner every time (rank-1 % of the defaults: strips 18.6 → 30.4, LOMO 27.0 →
#: 48.6, CUFS HOG 92.3 → 94.9, dense SIFT 97.1 → 98.7, PKU-Sketch 9.6 → 4.5, the untrained
#: distance 12.3 / 16.3 / 93.3 / 92.3 / 5.1)
GSM_BENCHMARK_PARAMS = {"n_components": None, "max_iter": 1000, "start_from": "auto",
                        "penalty": "start", "mu": 1e-3}

#: The paper runs of the closed forms (reproductions): the fixed size they had before
#: ``n_components="auto"`` became the benchmark's default, as the papers fix it per experiment
CLOSED_FORM_PAPER_PARAMS = {"n_components": 10}

METHODS: dict[str, MethodSpec] = {s.name: s for s in [
    MethodSpec("euclidean", "Euclidean", "Euclidean", {},
               "untrained squared Euclidean distance (the floor)",
               module="crossmetric.learners.baselines"),
    MethodSpec("pcca", "PCCA", "PCCA", {"n_components": None},
               "linear PCCA, beta=3 (paper); full rank (the untrained distance is a point of "
               "the model), trained from the best start on held-out training identities and "
               "kept at the best check (early_stopping='auto')",
               grid={"n_components": [8, 16, 32, None]},
               # PCCA §3: "we estimate β and d' by cross validation"; the papers give no
               # stopping rule and the unregularised objective overfits a few hundred
               # identities, so the iteration count is chosen first (as reproduce
               # pcca-viper does, ITER_GRID; 1000 = to the plateau)
               paper_grid=(ITERATION_STAGE, {"n_components": [16, 32, 64], "beta": [1.0, 3.0]}),
               paper_params={"n_components": 32, "init": "pca", "early_stopping": False},
               start_stage=PCCA_START_STAGE,
               module="crossmetric.learners.pcca"),
    MethodSpec("cmml", "CMML", "CMML", {"n_components": None},
               "linear CMML, beta=3 (paper); full rank (the untrained distance is a point of "
               "the model), trained from the best of the untrained distance, ridge CCA and "
               "the paper's random start on held-out training identities and kept at the "
               "best check (early_stopping='auto'); to the plateau of the objective otherwise",
               grid={"n_components": [10, 20, 30, None]},
               # CMML Figs. 4-7: the latent dimension (β = 3 "for all the experiments"),
               # after the iteration count (see pcca) and the start (CMML_START_STAGE)
               paper_grid=(CMML_START_STAGE, {"n_components": [10, 20, 30, 50, 100]}),
               paper_params={"n_components": 30, "init": "random", "early_stopping": False},
               start_stage=CMML_TUNE_START_STAGE,
               module="crossmetric.learners.cmml"),
    MethodSpec("cmlauc", "CML_AUC", "CMLAUC", {"reduce_to": 32},
               "full AUC window on the top 32 principal axes of the training samples (the "
               "paper reduces features by PCA first), the untrained distance of the rest kept "
               "from the identity start; Algorithm 1 with its defaults: all pairs in every "
               "batch (the paper's s1 = s2 = 1), whitened views, stops on the full objective; "
               "the best start and check on held-out training identities "
               "(early_stopping='auto')",
               grid={"gamma": [0.1, 1.0, 4.0], "mu": [1e-5, 1e-3]},
               paper_grid=CMLAUC_PAPER_GRID,
               paper_params={"init": "pca", "early_stopping": False, "reduce_to": None},
               start_stage=AUC_START_STAGE,
               module="crossmetric.learners.auc"),
    MethodSpec("cmlpauc", "CML_pAUC", "CMLAUC", {"fpr_range": (0.0, 0.1), "reduce_to": 32},
               "pAUC window [0, 0.1] (paper); otherwise as cmlauc",
               grid={"gamma": [0.1, 1.0, 4.0], "mu": [1e-5, 1e-3]},
               paper_grid=CMLAUC_PAPER_GRID,
               paper_params={"init": "pca", "early_stopping": False, "reduce_to": None},
               start_stage=AUC_START_STAGE,
               module="crossmetric.learners.auc"),
    MethodSpec("mahaauc", "Maha_AUC", "MahaAUC", {"n_components": 32, "reduce_to": 32},
               "single-modal AUC metric (on the CCA views when the views differ in width) on "
               "the top 32 principal axes of the training samples, the untrained distance of "
               "the rest kept from the identity start; Algorithm 1 with its defaults",
               grid={"gamma": [0.1, 1.0, 4.0], "mu": [1e-5, 1e-3]},
               paper_grid=CMLAUC_PAPER_GRID,
               paper_params={"init": "pca", "early_stopping": False, "reduce_to": None},
               module="crossmetric.learners.auc"),
    MethodSpec("ldml", "LDML", "LDML", {"n_components": 32},
               "LDML on the top 32 principal axes of the training samples (the untrained "
               "distance of the rest kept from the identity start, or the paper's PCA start, "
               "chosen on held-out identities); L-BFGS to the plateau of the objective",
               grid={"n_components": [8, 16, 32]},
               paper_params={"early_stopping": False},
               module="crossmetric.learners.ldml"),
    MethodSpec("clml", "CLML", "CLML", {"n_clusters": 4, "n_components": 32},
               "4 local metrics of 32 dims (small data); to the plateau of the objective "
               "(a 100-iteration cap left 1/20 default-benchmark fits unconverged)",
               grid={"n_clusters": [1, 2, 4, 8]},
               paper_params={"early_stopping": False},
               module="crossmetric.learners.clml", also=("CLMLCV",)),
    MethodSpec("gsm", "GSM", "GSM", GSM_BENCHMARK_PARAMS,
               "generalized similarity on fixed features; full width (the training span on "
               "wide views), trained from its fitted Euclidean special case with mu=1e-3 "
               "pulling towards it (start_from='auto', penalty='start': what its paper "
               "selection chose on training identities); Adam until the objective stops "
               "decreasing; the best start and check on held-out training identities",
               grid={"mu": [1e-4, 1e-3, 1e-2]},
               # GSM §5.5 (i): the reduced dimension, then the weight μ of eq. (7); see
               # GSM_PAPER_GRID for the one candidate that is ours
               paper_grid=GSM_PAPER_GRID,
               paper_params={"init": "random", "early_stopping": False,
                             "joint_reduction": False, **GSM_PAPER_SETTINGS},
               start_stage=GSM_START_STAGE,
               module="crossmetric.learners.gsm"),
    MethodSpec("deepgsm", "DeepGSM", "DeepGSM",
               {"hidden_units": 64, "n_identities": 10, "n_images_x": 4, "n_images_y": 4,
                "optimizer": "adam", "learning_rate": 3e-3, "lr_schedule": "plateau",
                "weight_decay": 1e-5, "mu": 1e-5, "tol": 2e-3, "n_iter_no_change": 50,
                "max_iter": 3000, "device": "cpu", "early_stopping": "auto"},
               "end-to-end GSM on the images; small network (64 units) beside the "
               "descriptor of the benchmark's images (--images, --dataset: it starts at the "
               "descriptor's untrained distance, not at a random network), and the best "
               "start and check on held-out training identities; rounds of 10 "
               "identities x 4 + 4 images; Adam (3e-3) with the plateau schedule: the rate "
               "drops 10x when a window of 50 rounds (about one pass over the training "
               "images) lowers the mean objective by less than 2e-3, and training stops, "
               "converged, when a window at 1/100 of the rate still does not (about 850 "
               "rounds); weight penalties 1e-5 (with the class's 5e-4 the penalty term "
               "shrinks with a time constant of ~10^4 rounds and no plateau is reached in "
               "this budget); max_iter is a cap, not a schedule; not tuned",
               module="crossmetric.deep.model"),
    MethodSpec("cca", "CCA", "CCA", {"n_components": "auto"},
               "CCA common space (closed form, ridge 0.1 of the mean eigenvalue); 10-128 "
               "components chosen on held-out training identities (10 without identities)",
               grid={"n_components": [5, 10, 20]},
               # CMML §4: "For CCA and CDFE the regularization parameters are cross-validated"
               paper_grid=({"n_components": [10, 20, 32, 64], "reg": [1e-3, 1e-2, 1e-1]},),
               paper_params=CLOSED_FORM_PAPER_PARAMS,
               module="crossmetric.learners.baselines"),
    MethodSpec("pls", "PLS", "PLS", {"n_components": "auto"},
               "PLS common space; 10-128 components chosen on held-out training identities "
               "(10 without identities)",
               grid={"n_components": [5, 10, 20]},
               paper_params=CLOSED_FORM_PAPER_PARAMS,
               module="crossmetric.learners.baselines"),
    MethodSpec("kcca", "KCCA", "KCCA", {"n_components": "auto", "gamma": "auto"},
               "kernel CCA (RBF); 10-128 components and the bandwidth chosen on held-out "
               "training identities (10 and the scale-free bandwidth without identities)",
               grid={"reg": [0.01, 0.1, 1.0], "n_components": [10, 20]},
               paper_params=CLOSED_FORM_PAPER_PARAMS,
               module="crossmetric.learners.baselines"),
    MethodSpec("cdfe", "CDFE", "CDFE", {"n_components": "auto", "reg": "auto"},
               "common discriminant feature extraction; 10-32 components and the ridge "
               "(1e-3 to 100) chosen on held-out training identities (10 and 1e-3 without "
               "identities)",
               grid={"n_components": [5, 10, 20]},
               # the ridge spans 1e-3 ... 100: its best value moves by 4 decades across data
               # sets (CDFE docstring), so a grid ending at 0.1 can leave it collapsed
               paper_grid=({"n_components": [10, 20, 32, 64], "reg": list(CDFE_REG_GRID)},),
               paper_params={"n_components": 10, "reg": 1e-3},
               module="crossmetric.learners.baselines"),
    MethodSpec("kissme", "KISSME", "KISSME", {},
               "KISS metric (single-modal)",
               grid={"n_components": [8, 16, None]},
               module="crossmetric.learners.baselines"),
    MethodSpec("kpls", "KPLS", "KPLS", {"n_components": 10},
               "kernel PLS (RBF per modality), 10 components (cmml paper's kernel baseline)",
               in_default=False,
               module="crossmetric.learners.baselines"),
    MethodSpec("kcdfe", "KCDFE", "KCDFE", {"n_components": 10},
               "kernel CDFE (RBF per modality), 10 components (cmml paper's kernel baseline)",
               in_default=False,
               module="crossmetric.learners.baselines"),
    MethodSpec("mvda", "MvDA", "MvDA", {"n_components": "auto"},
               "multi-view discriminant analysis; 10-128 components chosen on held-out "
               "training identities (10 without identities); identities = connected "
               "components of the positive pairs",
               paper_params=CLOSED_FORM_PAPER_PARAMS,
               module="crossmetric.learners.discriminant"),
    MethodSpec("mcca", "MCCA", "MCCA", {"n_components": 10},
               "multi-set CCA (MAXVAR), 10 components; with two views the closed-form CCA "
               "(the same canonical variates); fit_views takes more",
               in_default=False,
               module="crossmetric.learners.multiview"),
    MethodSpec("csr", "CSR", "CSR", {"alpha": "auto"},
               "coupled spectral regression, all n_identities - 1 responses; the ridge "
               "(1e-2 to 100) chosen on held-out training identities (1e-2 without "
               "identities); identities = connected components of the positive pairs",
               paper_params={"alpha": 1e-2},
               module="crossmetric.learners.discriminant"),
    MethodSpec("kcsr", "KCSR", "KCSR", {},
               "kernel CSR (RBF per modality), as csr", in_default=False,
               module="crossmetric.learners.discriminant"),
    MethodSpec("dmleig", "DML-eig", "DMLEig", {},
               "DML-eig (single-modal): accelerated solver of the paper's smoothed "
               "eigenvalue problem, to a duality gap of 1e-4", in_default=False,
               module="crossmetric.learners.dml_eig"),
    MethodSpec("itml", "ITML", "ITML", {"gamma": 1.0, "max_iter": 1000, "tol": 1e-3,
                                        "random_state": 0},
               "ITML (Davis et al. 2007), identity prior, bounds from the 5th/95th percentiles "
               "of squared training distances, gamma=1, tol 1e-3 (converges in tens of "
               "passes with reshuffled constraints)", in_default=False,
               module="crossmetric.learners.itml"),
    MethodSpec("nca", "NCA", "NCA", {"n_components": 32, "max_iter": 100, "random_state": 0},
               "scikit-learn's NCA on the distinct samples of the pairs, classes = connected "
               "components of the positive pairs; 32 dims, at most 100 L-BFGS iterations",
               in_default=False,
               module="crossmetric.learners.neighbours"),
    MethodSpec("lmnn", "LMNN", "LMNN", {"n_components": 32, "n_neighbors": 3, "mu": 0.5,
                                        "random_state": 0},
               "LMNN (k=3, mu=0.5 as the paper), classes = connected components of the "
               "positive pairs; 32 dims, L-BFGS until the objective falls by < 1e-4 "
               "(relative), at most 1000 iterations", in_default=False,
               module="crossmetric.learners.neighbours"),
    MethodSpec("mcc", "MCC", "MCC", {"n_components": 32, "max_iter": 1000, "random_state": 0},
               "MCC (collapsing classes), classes = connected components of the positive "
               "pairs; 32 dims, at most 1000 L-BFGS iterations (tol is relative: ~420 "
               "iterations on 200 digits)", in_default=False,
               module="crossmetric.learners.neighbours"),
    MethodSpec("prdc", "PRDC", "PRDC", {"max_triplets": 20000, "random_state": 0},
               "PRDC, triplets = positive and negative pairs sharing a sample; columns added "
               "until the objective stops decreasing (relative 1e-3)", in_default=False,
               module="crossmetric.learners.prdc"),
    MethodSpec("rca", "RCA", "RCA", {"n_components": 32},
               "RCA (metric-learn's), chunklets = connected components of the positive "
               "pairs; within-chunklet whitening in 32 Fisher directions (closed form)",
               in_default=False,
               module="crossmetric.learners.rca", also=("RCA_Supervised",)),
    MethodSpec("mlkr", "MLKR", "MLKR", {"n_components": 32, "random_state": 0},
               "MLKR (metric-learn's), one-hot targets = connected components of the positive "
               "pairs; 32 dims, L-BFGS-B to scipy's defaults, at most 1000 iterations",
               in_default=False,
               module="crossmetric.learners.mlkr"),
    MethodSpec("lfda", "LFDA", "LFDA", {"n_components": 32},
               "LFDA (Sugiyama 2007's scatters), classes = connected components of the "
               "positive pairs; 32 weighted eigenvectors (closed form)", in_default=False,
               module="crossmetric.learners.lfda"),
    MethodSpec("scml", "SCML", "SCML", {"n_basis": 400, "random_state": 0},
               "SCML (metric-learn's solver), triplets = 3 same-class and 10 other-class "
               "nearest neighbours, classes = connected components of the positive pairs; "
               "400 triplet-difference bases (metric-learn's 80 x d would hold a triplets x "
               "bases matrix of GBs on wide features), 10000 mini-batch iterations",
               in_default=False,
               module="crossmetric.learners.scml", also=("SCML_Supervised",)),
    MethodSpec("mmc", "MMC", "MMC", {"diagonal": True},
               "MMC (Xing et al. 2002), diagonal M by Newton's method (the full M, "
               "diagonal=False, needs an eigendecomposition per projection: minutes at 64 "
               "dims)", in_default=False,
               module="crossmetric.learners.mmc", also=("MMC_Supervised",)),
    MethodSpec("sdml", "SDML", "SDML", {"prior": "covariance", "balance_param": 1e-4},
               "SDML (Qi et al. 2009) with scikit-learn's graphical lasso; inverse-covariance "
               "prior (so the pair term keeps its weight when the features are rescaled) and "
               "balance 1e-4 (metric-learn's 0.5 makes the lasso's input indefinite); needs a "
               "nonsingular sample covariance (reduce constant features first)",
               in_default=False,
               module="crossmetric.learners.sdml", also=("SDML_Supervised",)),
    MethodSpec("lsml", "LSML", "LSML", {"random_state": 0},
               "LSML (Liu et al. 2012), quadruplets = each positive pair against a random "
               "negative pair; identity prior, tol 1e-3", in_default=False,
               module="crossmetric.learners.lsml", also=("LSML_Supervised",)),
    MethodSpec("covariance", "Covariance", "Covariance", {},
               "inverse covariance of the distinct training samples (the Mahalanobis "
               "baseline, no learning)", in_default=False,
               module="crossmetric.learners.covariance"),
]}


#: public estimators built around another learner: no command-line method of their own
WRAPPERS = {
    "SeedEnsemble": "crossmetric.learners.ensemble",
    "Supervised": "crossmetric.learners.supervised",
    "CrossPairs": "crossmetric.learners.supervised",
}


def public_classes() -> dict[str, str]:
    """``{class name: module}`` of every public estimator: each :data:`METHODS` entry's
    ``class_name`` and ``also``, and the :data:`WRAPPERS`.

    ``crossmetric.<name>`` (``crossmetric._LAZY``), the classes a model file may name
    (:data:`crossmetric.persistence.ALLOWED_CLASSES`) and the API conformance tests are
    derived from it, so that a learner is declared once, by its :class:`MethodSpec`.

    Examples
    --------
    >>> public_classes()["PCCA"], public_classes()["CLMLCV"]
    ('crossmetric.learners.pcca', 'crossmetric.learners.clml')
    """
    out: dict[str, str] = {}
    for spec in METHODS.values():
        for name in (spec.class_name, *spec.also):
            out.setdefault(name, spec.module)
    out.update(WRAPPERS)
    return out


def _did_you_mean(key: str) -> str:
    """`` (did you mean 'NAME'?)`` for the registered name closest to ``key``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(key, list(METHODS), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _spec(name: str) -> MethodSpec:
    key = str(name).strip().lower()
    if key not in METHODS:
        raise ValueError(f"unknown method {name!r}{_did_you_mean(key)}; expected one of "
                         f"{', '.join(METHODS)}.")
    return METHODS[key]


def _learner_class(spec: MethodSpec):
    return getattr(importlib.import_module(spec.module), spec.class_name)


def method_status(name: str) -> str | None:
    """``None`` when the method can be built, else why not (module or class missing).

    Raises
    ------
    ValueError
        Unknown method name.
    ImportError
        The learner module exists but fails to import (e.g. a missing dependency).
    """
    spec = _spec(name)
    module = spec.module
    try:
        _learner_class(spec)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return f"module {module} is not part of this installation"
        raise
    except AttributeError:
        return f"class {spec.class_name} is not defined in {module}"
    return None


def available_methods() -> dict[str, str | None]:
    """``{name: None | reason}`` for every registered method, in registry order."""
    return {name: method_status(name) for name in METHODS}


def make_estimator(name: str, *, paper: bool = False, **overrides: Any) -> Any:
    """An unfitted learner for a command-line method name, with the benchmark settings.

    Parameters
    ----------
    name : str
        One of :data:`METHODS` (case-insensitive).
    paper : bool, default=False
        The paper's own plain run (``MethodSpec.paper_params``: its start, no held-out
        guard), as the reproductions fit it.
    **overrides
        Constructor arguments replacing the registry's (e.g. ``random_state=0``).

    Raises
    ------
    ValueError
        Unknown name, or a method not available in this installation.
    """
    spec = _spec(name)
    params = dict(spec.params)
    if paper:
        params.update(spec.paper_params)
    params.update(overrides)
    return available_class(spec.name)(**params)


#: the settings of a paper run that the library's guarded run replaces by its class defaults
GUARD_PARAMS = ("init", "early_stopping")


def guarded_estimator(name: str, **overrides: Any) -> Any:
    """The paper run of :func:`make_estimator` (``paper=True``) with the library's start and
    held-out guard instead of the paper's start and plain optimisation -- the class defaults
    of :data:`GUARD_PARAMS` (``init="auto"``, ``early_stopping="auto"``) -- and every other
    paper setting kept; ``None`` for a method whose paper run has no guard to add (its
    ``paper_params`` do not turn ``early_stopping`` off). The reproductions print this run
    beside the paper's.

    Examples
    --------
    >>> from crossmetric.registry import guarded_estimator, make_estimator
    >>> make_estimator("cmml", paper=True).get_params()["init"]
    'random'
    >>> est = guarded_estimator("cmml")
    >>> est.get_params()["init"], est.get_params()["early_stopping"], est.n_components
    ('auto', 'auto', 30)
    >>> guarded_estimator("cca") is None
    True
    """
    spec = _spec(name)
    if spec.paper_params.get("early_stopping", True) is not False:
        return None
    params = {**spec.params, **spec.paper_params, **overrides}
    for key in GUARD_PARAMS:
        if key not in overrides:
            params.pop(key, None)
    return available_class(spec.name)(**params)


def available_class(name: str) -> type[BaseEstimator]:
    """The learner class of a command-line method name.

    Raises
    ------
    ValueError
        Unknown name, or a method not available in this installation.
    """
    spec = _spec(name)
    reason = method_status(spec.name)
    if reason is not None:
        raise ValueError(f"method {spec.name!r} is not available: {reason}.")
    return _learner_class(spec)


def select_methods(names: str | Iterable[str] | None = None) -> list[str]:
    """Registry names from a selection: ``None`` (the default set), ``"all"``, or names.

    Parameters
    ----------
    names : None, str or sequence of str
        ``None``: every method with ``in_default`` (the benchmark's default); ``"all"``: every
        registered method; else a comma-separated string or a sequence of names
        (case-insensitive, duplicates dropped, order kept).

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        No name, or unknown names (with the closest registered name as a hint).

    Examples
    --------
    >>> select_methods("PCCA, cmml,pcca")
    ['pcca', 'cmml']
    >>> select_methods("pcaa")
    Traceback (most recent call last):
    ...
    ValueError: unknown method(s) pcaa (did you mean 'pcca'?); expected a comma-separated list ...
    """
    if names is None:
        return [name for name, spec in METHODS.items() if spec.in_default]
    if isinstance(names, str):
        if names.strip().lower() == "all":
            return list(METHODS)
        names = names.split(",")
    keys = [str(t).strip().lower() for t in names if str(t).strip()]
    if not keys:
        raise ValueError("names is empty: expected at least one method name.")
    unknown = [n for n in keys if n not in METHODS]
    if unknown:
        hint = _did_you_mean(unknown[0]) if len(unknown) == 1 else ""
        raise ValueError(f"unknown method(s) {', '.join(unknown)}{hint}; expected a "
                         f"comma-separated list among {', '.join(METHODS)}.")
    return list(dict.fromkeys(keys))


def method_kind(name: str) -> tuple[str, str | None]:
    """``(modality, reason unavailable)`` of a method, without importing PyTorch.

    The modality is ``"cross-modal"`` or ``"single-modal"``, with ``" (raw images)"`` for a
    learner of images; the reason is ``None`` when the method can be built. The deep
    learners are not imported (they need torch): only whether torch is installed is checked.

    Examples
    --------
    >>> method_kind("pcca"), method_kind("cmml")
    (('single-modal', None), ('cross-modal', None))
    """
    import importlib.util

    spec = _spec(name)
    module = spec.module
    if module.startswith("crossmetric.deep"):
        ok = importlib.util.find_spec("torch") is not None
        return "cross-modal (raw images)", None if ok else "PyTorch is not installed"
    try:
        cls = getattr(importlib.import_module(module), spec.class_name)
    except (ImportError, AttributeError) as exc:
        return "?", " ".join(str(exc).split())
    kind = "cross-modal" if getattr(cls, "_cross_modal", True) else "single-modal"
    if int(getattr(cls, "_sample_ndim", 1)) > 1:
        kind += " (raw images)"
    return kind, None
