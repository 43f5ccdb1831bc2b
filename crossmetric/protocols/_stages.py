"""A conditional stage of :func:`crossmetric.protocols.model_selection.search_stages`.

Kept apart from :mod:`crossmetric.protocols.model_selection` (which imports scikit-learn and the
protocols) so that :mod:`crossmetric.registry` can declare its grids with it and stay light.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["StageIf"]


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
    >>> from crossmetric.protocols._stages import StageIf
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
