"""The settings that the protocol runner hands to every work unit, as frozen dataclasses.

:func:`~crossmetric.protocols.run_protocols` checks its keyword arguments once and packs
what a split's fit and measurement need into one :class:`RunOptions`; the per-method parts
(PCA width, the "-C" CCA step, the tuning grid) are set with :func:`dataclasses.replace`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

__all__ = ["RunOptions", "TuneOptions"]


@dataclass(frozen=True)
class TuneOptions:
    """Inner model selection of one method
    (:func:`crossmetric.protocols.model_selection.search_stages`).

    Examples
    --------
    >>> from crossmetric.protocols import TuneOptions
    >>> TuneOptions(grid={"beta": [1.0, 3.0]}, scoring="rank1").n_splits
    3
    """

    grid: object
    n_splits: int = 3
    group: str = "identity"
    n_negatives: int = 1
    scoring: str = "auc"
    max_positives: int | None = 1000


@dataclass(frozen=True, eq=False)
class RunOptions:
    """What one split's fit and measurement need (see :func:`run_protocols` for each).

    ``labels``: the identity of every row (``None`` for fixed pairs); ``cams``: the camera of
    every row of ``X`` and of ``Y`` (``None``: no camera ids); ``pca``: the width of the
    per-split PCA of the views (``None``: none; ``"auto"``: the training identities minus one,
    when the views are wider); ``cca``: the "-C" CCA step of a single-modal
    learner; ``tune``: the method's inner model selection; ``probe``: the modality of the
    identification probes (``"x"``, or ``"y"`` against a gallery of ``X`` rows);
    ``retrieval_k``: the list length of the retrieval protocol's mAP@k.

    Examples
    --------
    >>> from crossmetric.protocols.options import RunOptions
    >>> RunOptions.of({"fpr": 1e-2, "max_rank": 5}).max_rank
    5
    """

    fpr: float = 1e-3
    fpr_range: tuple = (0.0, 0.1)
    max_rank: int = 20
    labels: np.ndarray | None = None
    cca_components: int = 32
    re_rank: object = False
    query_expansion: int | None = None
    pair_measures: bool = False
    pca_joint: bool | str = False
    cams: tuple | None = None
    pca: int | str | None = None
    cca: bool = False
    tune: TuneOptions | None = None
    probe: str = "x"
    retrieval_k: int = 50

    @classmethod
    def of(cls, options) -> RunOptions:
        """``options`` itself, or a :class:`RunOptions` made from a mapping of its fields (the
        untyped dictionary earlier versions passed around)."""
        if isinstance(options, RunOptions):
            return options
        if not isinstance(options, Mapping):
            raise ValueError(f"options must be RunOptions or a mapping of its fields, got "
                             f"{type(options).__name__}.")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise ValueError(f"options: unknown keys {unknown}; expected some of "
                             f"{', '.join(sorted(names))}.")
        kw = dict(options)
        if isinstance(kw.get("tune"), Mapping):
            kw["tune"] = TuneOptions(**kw["tune"])
        return cls(**kw)
