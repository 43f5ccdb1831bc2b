"""The model's pipeline on the command line: ``fit``, ``evaluate`` and ``search`` on image
folders (the descriptor and view step stored in the model file,
:class:`crossmetric.protocols.pipeline.ViewPipeline`), the sides of a cross-modal model
(``--probe-domain``) and ``fit``'s check on held-out identities."""

from __future__ import annotations

import sys

import numpy as np

from crossmetric.cli._common import CLIError, _one_line

#: inputs look like the model's other side when their distance to its statistics
#: (:meth:`~crossmetric.protocols.pipeline.ViewPipeline.side_distances`) is below this share of
#: the distance to their own side's, and smaller by this many pooled variances
SIDE_RATIO, SIDE_MARGIN = 0.5, 0.1
#: ``fit`` holds identities out from this many training identities on
MIN_HOLD_OUT_IDENTITIES = 10
#: ``fit`` warns when the held-out identities' AUC is this much below the training one's
AUC_GAP = 0.05
#: ... or their rank-1 this much below (a share; the held-out gallery is the smaller one)
RANK1_GAP = 0.25


def _is_pipeline(model) -> bool:
    from crossmetric.protocols.pipeline import ViewPipeline

    return isinstance(model, ViewPipeline)


def _descriptor_settings(args) -> tuple[str | None, dict | None]:
    """``--descriptor`` and ``--descriptor-param NAME=VALUE`` items (checked against the
    descriptor's class), ``(None, None)`` when neither is given."""
    from crossmetric.cli._data import _check_descriptor
    from crossmetric.config import parse_descriptor_param

    params = {}
    for item in getattr(args, "descriptor_param", None) or ():
        try:
            name, value = parse_descriptor_param(item)
        except ValueError as exc:
            raise CLIError(_one_line(exc)) from None
        params[name] = value
    if args.descriptor is not None or params:
        _check_descriptor(args.descriptor or "hog", params or None)
    return args.descriptor, (params or None)


def _check_image_options(args, data_options: tuple[str, ...]) -> None:
    """``--images`` excludes the feature-file options; the image options need ``--images``."""
    from crossmetric.cli._common import _parse_size

    if args.images is None:
        for opt in ("pattern", "descriptor", "descriptor_param", "size"):
            if getattr(args, opt, None) is not None:
                raise CLIError(f"--{opt.replace('_', '-')} needs --images DIR.")
        return
    given = [o for o in data_options if getattr(args, o.lstrip("-").replace("-", "_"),
                                                  None) is not None]
    if given:
        raise CLIError(f"--images takes the samples and their identities from the folder; "
                       f"leave out {', '.join(given)}.")
    _parse_size(args.size)


def _use_model_settings(args, model) -> None:
    """``evaluate`` / ``search --images``: the descriptor, its parameters and the size the
    model was fitted with, unless given; given and different is an error."""
    descriptor, params = _descriptor_settings(args)
    if not _is_pipeline(model) or model.descriptor is None:
        args.descriptor, args.descriptor_params = descriptor, params
        return
    size = None if args.size is None else _size_tuple(args.size)
    stored = {"--descriptor": model.descriptor,
              "--descriptor-param": dict(model.descriptor_params or {}) or None,
              "--size": None if model.size is None else tuple(model.size)}
    for opt, value in (("--descriptor", descriptor), ("--descriptor-param", params),
                       ("--size", size)):
        if value is not None and value != stored[opt]:
            raise CLIError(f"{opt}: the model was fitted with {_show(opt, stored[opt])}; its "
                           f"inputs must be made the same way (leave {opt} out to use the "
                           "model's).")
    args.descriptor, args.descriptor_params = model.descriptor, stored["--descriptor-param"]
    if stored["--size"] is not None:
        args.size = f"{stored['--size'][0]}x{stored['--size'][1]}"


def _size_tuple(text):
    from crossmetric.cli._common import _parse_size

    size = _parse_size(text)
    return None if size is None else tuple(int(v) for v in size)


def _show(opt: str, value) -> str:
    if value is None:
        return f"no {opt}"
    if opt == "--size":
        return f"--size {value[0]}x{value[1]}"
    if isinstance(value, dict):
        return "--descriptor-param " + " ".join(f"{k}={v!r}" for k, v in value.items())
    return f"{opt} {value}"


def _domain_names(model) -> tuple[str, str]:
    names = getattr(model, "domain_names", None) if _is_pipeline(model) else None
    return (str(names[0]), str(names[1])) if names is not None else ("x", "y")


def _probe_swap(args, model) -> bool:
    """Whether the probes (``--x``, ``--queries``) are the model's second side:
    ``--probe-domain`` naming it."""
    name = getattr(args, "probe_domain", None)
    if name is None:
        return False
    names = _domain_names(model)
    if name not in names:
        raise CLIError(f"--probe-domain: {name!r} is not a side of the model; expected "
                       f"{names[0]!r} or {names[1]!r}.")
    return name == names[1] and names[0] != names[1]


def _check_side(model, V: np.ndarray, side: int, what: str, swap: bool = False) -> None:
    """Refuse inputs of neither side's width; warn in one line when they look like the
    model's other side (their feature means closer to its statistics)."""
    names = _domain_names(model)
    widths = [getattr(model, f"_sample_shape_{s}_", None) for s in "xy"]
    widths = [None if w is None else int(np.prod(w)) for w in widths]
    n = int(np.prod(V.shape[1:]))
    other = 1 - side
    if widths[side] is not None and n != widths[side]:
        hint = (f"; that is the width of its {names[other]!r} side: give --probe-domain "
                f"{names[0] if swap else names[1]}" if widths[other] == n else "")
        raise CLIError(f"{what}: {n} features, but the model's {names[side]!r} side takes "
                       f"{widths[side]}{hint}.")
    if not _is_pipeline(model) or V.shape[0] < 2:
        return
    d = model.side_distances(V)
    if d[other] < SIDE_RATIO * d[side] and d[side] - d[other] > SIDE_MARGIN:
        print(f"crossmetric: warning: {what} looks like the model's {names[other]!r} side, "
              f"not its {names[side]!r} side (feature means {d[other]:.3g} vs {d[side]:.3g} "
              "pooled variances away); check --probe-domain and the order of the inputs",
              file=sys.stderr)


def _apply_pipeline(model, probes, gallery, swap: bool, what_p: str, what_g: str | None):
    """``(learner, probes, gallery)``: the checks of :func:`_check_side`, then the model's
    view step applied to each side (the probes are the first side, the second with
    ``swap``); ``gallery`` may be None."""
    side = 1 if swap else 0
    if probes.ndim == 2:
        _check_side(model, probes, side, what_p, swap)
        if gallery is not None:
            _check_side(model, gallery, 1 - side, what_g, swap)
    if not _is_pipeline(model):
        return model, probes, gallery
    reduce = (model.reduce_y, model.reduce_x) if swap else (model.reduce_x, model.reduce_y)
    try:
        return (model.learner_, reduce[0](probes),
                None if gallery is None else reduce[1](gallery))
    except ValueError as exc:
        raise CLIError(_one_line(exc)) from None


class _SwappedSides:
    """A fitted learner read the other way round: ``cross_distance(A, B)`` of second-side
    samples ``A`` against first-side samples ``B``."""

    def __init__(self, learner):
        self.learner = learner

    def cross_distance(self, A, B) -> np.ndarray:
        return np.asarray(self.learner.cross_distance(B, A)).T


# --------------------------------------------------------------- fit's held-out check
def _hold_out(args, pairs: np.ndarray, y: np.ndarray, n_x: int, n_y: int, tied: bool):
    """``((train, validation) masks over the pairs, None)``: whole identities held out by the
    one splitter of the learners' early stopping
    (:func:`crossmetric._solvers.early_stopping.validation_split`); ``(None, why not)`` when
    there is no hold-out (``--no-validation``: ``(None, None)``)."""
    if getattr(args, "no_validation", False):
        return None, None
    from crossmetric._solvers.early_stopping import positive_completeness, validation_split
    from crossmetric.pairs import identities_from_pairs, positive_components

    pos = y == 1
    if tied:
        comp = positive_components(n_x, pairs[:, 0], pairs[:, 1], y)[1]
        n_ids = np.unique(comp[pairs[pos, 0]]).size
    else:
        ids_x = identities_from_pairs(n_x, n_y, pairs[:, 0], pairs[:, 1], y)[0]
        n_ids = np.unique(ids_x[pairs[pos, 0]]).size
    if n_ids < MIN_HOLD_OUT_IDENTITIES:
        return None, (f"{n_ids} identities, fewer than {MIN_HOLD_OUT_IDENTITIES}; fitted on "
                      "every pair")
    # as the learners' early stopping: only when the positives list every same-identity
    # pair, so that their components are identities and not fragments of sampled classes
    offset = 0 if tied else n_x
    comp = positive_components(n_x if tied else n_x + n_y, pairs[:, 0], pairs[:, 1] + offset,
                               y)[1]
    if positive_completeness(comp, pairs[:, 0], pairs[:, 1] + offset, y, n_x, tied) < 1 - 1e-9:
        return None, ("the positive pairs are a sample of each class's, not identities; "
                      "fitted on every pair")
    try:  # --validation-fraction was checked with the other options
        return validation_split(pairs[:, 0], pairs[:, 1], y, n_x, n_y, tied=tied,
                                fraction=args.validation_fraction,
                                random_state=args.seed if args.seed is not None else 0), None
    except ValueError as exc:
        return None, f"{_one_line(exc).split(';')[0]}; fitted on every pair"


def _identity_scores(model, X, Y, pairs: np.ndarray, y: np.ndarray, tied: bool, seed):
    """``(rank-1, AUC, identities)`` of a fitted model on the samples of ``pairs``' positive
    pairs: every cross distance among them, scored as the learners' early stopping scores its
    held-out identities (:class:`crossmetric._solvers.early_stopping.EarlyStopping`)."""
    from crossmetric._solvers.early_stopping import EarlyStopping, identity_validation
    from crossmetric.pairs import identities_from_pairs, positive_components

    pos = pairs[y == 1]
    if tied:
        rows = np.unique(pos)
        comp = positive_components(X.shape[0], pairs[:, 0], pairs[:, 1], y)[1]
        rows_x = rows_y = rows
        ids_x = ids_y = comp[rows]
    else:
        rows_x, rows_y = np.unique(pos[:, 0]), np.unique(pos[:, 1])
        ix, iy, _ = identities_from_pairs(X.shape[0], Y.shape[0], pairs[:, 0], pairs[:, 1], y)
        ids_x, ids_y = ix[rows_x], iy[rows_y]
    rng = np.random.RandomState(0 if seed is None else seed)
    validation, kx, ky = identity_validation(ids_x, ids_y, rng, tied=tied)
    D = np.asarray(model.cross_distance(X[rows_x[kx]], (X if tied else Y)[rows_y[ky]]),
                   dtype=float)
    r1, auc = EarlyStopping(None, validation, 1).score_matrix(D)
    return r1, auc, int(np.unique(ids_x).size)


def _report_hold_out(train: tuple, val: tuple | None) -> list[str]:
    """The line beside ``fit``'s training figures, and the warning when the gap is large."""
    line = (f"  rank-1 / AUC over the training identities ({train[2]}): "
            f"{100 * train[0]:.1f} % / {train[1]:.4f}")
    if val is None:
        return [line]
    line += (f"; held-out identities ({val[2]}, not fitted): {100 * val[0]:.1f} % / "
             f"{val[1]:.4f}")
    if train[1] - val[1] > AUC_GAP or train[0] - val[0] > RANK1_GAP:
        print(f"crossmetric: warning: the held-out identities score far below the training "
              f"ones (rank-1 {100 * val[0]:.1f} % vs {100 * train[0]:.1f} %, AUC "
              f"{val[1]:.4f} vs {train[1]:.4f}): the model fits its training identities "
              "better than new ones; try stronger regularisation (--param), fewer "
              "components or more identities", file=sys.stderr)
    return [line]
