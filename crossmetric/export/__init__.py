"""Export a learner's towers for inference without crossmetric: ONNX graphs and faiss indexes.

* :func:`to_onnx` writes an ONNX graph mapping a float32 batch of one modality's samples to
  ``model.transform_x`` (``modality="x"``) or ``transform_y`` (``"y"``). Linear towers become
  one matrix (and a bias where the transform centres or scales); kernel towers keep their
  support samples and compute the kernel in the graph (``linear``, ``rbf``, ``chi2``,
  ``chi2_rbf``, exact or Nyström); CLML's towers compute its mixture's sparse soft
  assignments and the weighted local maps; DeepGSM goes through ``torch.onnx.export``.
* :func:`to_faiss` writes a linear tower as a ``faiss.IndexPreTransform`` (a
  ``LinearTransform`` in front of an ``IndexFlatL2``) to one ``.faiss`` file: add and search
  raw samples, the index embeds them.

Files are written to a temporary file in the target folder and moved into place
(``os.replace``). Both need the ``[export]`` extra (``onnx``, ``onnxruntime``) or
``[retrieval]`` (faiss) respectively.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.validation import check_is_fitted

__all__ = ["to_onnx", "to_faiss", "tower_steps"]


def _check_modality(modality) -> str:
    if modality not in ("x", "y"):
        raise ValueError(f"modality must be 'x' or 'y', got {modality!r}.")
    return modality


def _write_atomic(path, data: bytes) -> str:
    """Write ``data`` to ``path`` atomically (:func:`crossmetric.persistence.atomic_open`)."""
    from crossmetric.persistence import atomic_open

    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return os.fspath(path)


# ----------------------------------------------------------------------------- tower steps
def _affine(W, b=None):
    return ("affine", np.asarray(W, dtype=np.float64),
            None if b is None else np.asarray(b, dtype=np.float64))


def _kernel_map_steps(km) -> list:
    return [("kernel", km.kernel, np.asarray(km.X_fit_, dtype=np.float64), km.gamma_)]


def _nystroem_steps(fm) -> list:
    mean = getattr(fm, "feature_mean_", None)  # a centred map: φ(x) − mean
    return [("kernel", fm.kernel, np.asarray(fm.landmarks_, dtype=np.float64), fm.gamma_),
            _affine(fm.normalization_.T, None if mean is None else -mean)]


def _pca_affine(pca) -> tuple[np.ndarray, np.ndarray]:
    W = pca.components_.T.copy()
    if getattr(pca, "whiten", False):
        W /= np.sqrt(pca.explained_variance_)
    return W, -(pca.mean_ @ W)


def _finish(model) -> list:
    cosine = getattr(model, "distance", None) == "cosine"
    return [("l2_normalize",)] if cosine and not getattr(model, "untrained_", False) else []


def _euclidean(model, side):
    return [_affine(np.diag(1.0 / model.scale_), -model.mean_ / model.scale_)]


def _identity(model, side):
    return [_affine(np.eye(model.n_features_in_))]


def _linear_components(model, side):
    return [_affine(model.components_.T)]


def _pcca(model, side):
    if hasattr(model, "feature_map_"):
        return _nystroem_steps(model.feature_map_) + [_affine(model.feature_components_.T)]
    if hasattr(model, "dual_coef_"):
        return _kernel_map_steps(model.kernel_map_) + [_affine(model.dual_coef_.T)]
    return [_affine(model.components_.T)]


def _cmml(model, side):
    fm = getattr(model, f"feature_map_{side}_", None)
    if fm is not None:
        return _nystroem_steps(fm) + [_affine(getattr(model, f"feature_components_{side}_").T)]
    km = getattr(model, f"kernel_map_{side}_", None)
    if km is not None:
        return _kernel_map_steps(km) + [_affine(getattr(model, f"dual_coef_{side}_").T)]
    return [_affine(getattr(model, f"components_{side}_").T)]


def _cmlauc(model, side):
    C, mean = getattr(model, f"components_{side}_"), getattr(model, f"mean_{side}_")
    return [_affine(C.T, -(mean @ C.T))]


def _latent(model, side):
    mean, std = getattr(model, f"{side}_mean_"), getattr(model, f"{side}_std_")
    R = getattr(model, f"{side}_rotations_")
    W = R / std[:, None]
    return [_affine(W, -(mean @ W))] + _finish(model)


def _linear_towers(model, side):
    C, mean = getattr(model, f"components_{side}_"), getattr(model, f"mean_{side}_")
    return [_affine(C.T, -(mean @ C.T))] + _finish(model)


def _kcca(model, side):
    if hasattr(model, "untrained_components_"):  # the held-out choice kept the untrained one
        return [_affine(model.untrained_components_.T)] + _finish(model)
    fm = getattr(model, f"feature_map_{side}_", None)
    if fm is not None:
        coef = getattr(model, f"feature_coef_{side}_")   # of the map's centred features
        return _nystroem_steps(fm) + [_affine(coef)] + _finish(model)
    return (_kernel_map_steps(getattr(model, f"kernel_map_{side}_"))
            + [("centre", getattr(model, f"kernel_col_mean_{side}_"),
                float(getattr(model, f"kernel_mean_{side}_"))),
               _affine(getattr(model, f"dual_coef_{side}_"))] + _finish(model))


def _gsm(model, side):
    kind, obj, scale = getattr(model, f"reducer_{side}_")
    if kind == "pca":
        W, b = _pca_affine(obj)
        W, b = W / scale, b / scale
    else:
        W, b = np.diag(1.0 / np.broadcast_to(scale, obj.shape)), -obj / scale
    return [_affine(W, b), _affine(getattr(model, f"components_{side}_").T)]


def _clml(model, side):
    from crossmetric.export._onnx_graph import gmm_terms

    Ls, bs = model.local_components_, model.local_offsets_  # (k, p, d), (k, p)
    k, p, d = Ls.shape
    W = np.concatenate([L.T for L in Ls], axis=1)  # (d, k·p)
    gmm_affine = None if model.pca_ is None else _pca_affine(model.pca_)
    return [("clml", gmm_affine, gmm_terms(model.gmm_), float(model.min_assignment),
             model.max_assignments, W, bs.reshape(-1), k)]


def _kernel_coordinates(model, side, owner):
    coords = getattr(model, f"coordinates_{side}_")
    steps = _kernel_map_steps(coords.kernel_map_) + [
        ("centre", coords.col_mean_, float(coords.total_mean_)), _affine(coords.projection_)]
    mro = type(model).__mro__
    after = mro[mro.index(owner) + 1:]
    nxt = next(c for c in after if "_embed_x" in c.__dict__)
    return steps + _handler(nxt)(model, side)


def _handlers() -> dict:
    from crossmetric import _base, kernels
    from crossmetric.learners import auc, baselines, clml, cmml, gsm, pcca, prdc
    from crossmetric.learners.baselines import _common
    from crossmetric.learners.baselines import _latent as _latent_module

    return {
        baselines.Euclidean: _euclidean,
        prdc.PRDC: _identity,
        _base.LinearSingleModalMixin: _linear_components,
        pcca.PCCA: _pcca,
        cmml.CMML: _cmml,
        auc.CMLAUC: _cmlauc,
        _latent_module._SklearnLatent: _latent,
        _common.LinearTowers: _linear_towers,
        baselines.KCCA: _kcca,
        gsm.GSM: _gsm,
        clml.CLML: _clml,
        kernels._KernelCoordinatesMixin:
            lambda m, s: _kernel_coordinates(m, s, kernels._KernelCoordinatesMixin),
    }


def _complement(model, side) -> list:
    """The scaled coordinates of the raw input outside the model's basis, inserted where its
    transform puts them (:func:`crossmetric._base.with_complement`; GSM after each ``L``
    block), when the model keeps the untrained distance there."""
    scale = float(getattr(model, "complement_scale_", 0.0))
    if scale <= 0:
        return []
    Q = np.asarray(model.complement_basis_, dtype=np.float64)
    inserts: tuple = ()
    if type(model).__name__ == "GSM":  # F = [L_A x, L_C x, dᵀx]: after each L block
        r = (getattr(model, f"components_{side}_").shape[0] - 1) // 2
        inserts = (r, 2 * r)
    return [("complement", Q, scale, inserts)]


def _handler(owner):
    fn = _handlers().get(owner)
    if fn is None:
        raise ValueError(
            f"the towers of {owner.__name__} cannot be exported: its transform "
            f"({owner.__name__}._embed_x) has no graph form in crossmetric.export.")
    return fn


def _owner(model, side: str):
    """The class whose ``_embed_x`` computes this side's tower."""
    for cls in type(model).__mro__:
        if f"_embed_{side}" in cls.__dict__:
            if side == "y" and cls.__name__ == "PairLearnerMixin":  # y-tower = x-tower
                return _owner(model, "x")
            return cls
    raise ValueError(f"{type(model).__name__} is not a crossmetric pair learner (no _embed_x).")


def tower_steps(model: Any, modality: str = "x") -> list:
    """One tower of a fitted learner as a list of steps (see
    :mod:`crossmetric.export._onnx_graph`),
    consecutive affine maps folded into one matrix and bias.

    Raises
    ------
    ValueError
        The learner's transform has no graph form (e.g. a subclass with its own
        ``_embed_x``), or it is a deep learner (exported through PyTorch instead).
    """
    side = _check_modality(modality)
    check_is_fitted(model)
    steps = _handler(_owner(model, side))(model, side) + _complement(model, side)
    folded: list = []
    for step in steps:
        if step[0] == "affine" and folded and folded[-1][0] == "affine":
            _, W1, b1 = folded.pop()
            _, W2, b2 = step
            b = None if b1 is None and b2 is None else (
                (0.0 if b1 is None else b1 @ W2) + (0.0 if b2 is None else b2))
            folded.append(("affine", W1 @ W2, b))
        else:
            folded.append(step)
    return folded


# --------------------------------------------------------------------------------- ONNX
def _is_deep(model) -> bool:
    return hasattr(model, "net_") and type(model).__name__ == "DeepGSM"


def _deep_onnx_bytes(model, side: str) -> bytes:
    import io
    import warnings

    import torch

    from crossmetric.deep.networks import GSMTower

    tower = GSMTower(model.net_, side, flip=bool(model.test_flip)).cpu().eval()
    shape = tuple(getattr(model, f"_sample_shape_{side}_"))

    class _Images(torch.nn.Module):
        """(n, h, w[, c]) float images, as DeepGSM.transform_* takes them, to the tower."""

        def __init__(self):
            super().__init__()
            self.tower = tower

        def forward(self, x):
            x = x[:, None] if x.ndim == 3 else x.permute(0, 3, 1, 2)
            return self.tower(x)

    buf = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter's deprecation
        # (torch annotates ``f`` as a path; its TorchScript exporter also writes to a file object)
        torch.onnx.export(_Images().eval(), (torch.zeros(2, *shape),), buf,  # type: ignore[arg-type]
                          dynamo=False,
                          input_names=[side.upper()], output_names=["embedding"],
                          dynamic_axes={side.upper(): {0: "n"}, "embedding": {0: "n"}},
                          opset_version=17)
    return buf.getvalue()


def to_onnx(model: Any, path: str | os.PathLike[str], modality: str = "x") -> str:
    """Write one tower of a fitted learner as an ONNX graph.

    The graph has one input, named ``"X"`` or ``"Y"``: a float32 batch ``(n, n_features)``
    (images ``(n, h, w[, c])`` for DeepGSM), and one output ``"embedding"``, float32
    ``(n, n_components)``, equal to ``model.transform_x`` (or ``transform_y``) of the same
    samples. Kernel and mixture towers are computed in float64 inside the graph; a χ² kernel
    tower forms an ``(n, n_support, n_features)`` intermediate, so feed it moderate batches.

    Parameters
    ----------
    model : fitted pair learner
        Any learner of :mod:`crossmetric.registry` (and their kernel / Nyström settings).
    path : str or os.PathLike
        Output file (conventionally ``.onnx``), written atomically.
    modality : {"x", "y"}, default="x"

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    ValueError
        Unknown modality, or a learner whose transform has no graph form.

    Examples
    --------
    >>> import numpy as np, onnxruntime as ort
    >>> from crossmetric import LDML, make_pairs
    >>> from crossmetric.export import to_onnx
    >>> rng = np.random.RandomState(0)
    >>> X, labels = rng.rand(40, 5), np.repeat(np.arange(4), 10)
    >>> pairs, y = make_pairs(labels, random_state=0)
    >>> model = LDML(n_components=2, preprocessor=X).fit(pairs, y)
    >>> import tempfile, os
    >>> path = to_onnx(model, os.path.join(tempfile.mkdtemp(), "ldml.onnx"))
    >>> session = ort.InferenceSession(path)
    >>> Z = session.run(None, {"X": X.astype(np.float32)})[0]
    >>> bool(np.allclose(Z, model.transform_x(X.astype(np.float32)), atol=1e-5))
    True
    """
    side = _check_modality(modality)
    check_is_fitted(model)
    if _is_deep(model):
        data = _deep_onnx_bytes(model, side)
    else:
        from crossmetric.export._onnx_graph import build_model

        steps = tower_steps(model, side)
        shape = tuple(getattr(model, f"_sample_shape_{side}_"))
        doc = f"crossmetric {type(model).__name__}.transform_{side}"
        data = build_model(steps, shape, side.upper(), doc).SerializeToString()
    return _write_atomic(path, data)


# -------------------------------------------------------------------------------- faiss
def to_faiss(model: Any, path: str | os.PathLike[str], modality: str = "x", *,
             database: ArrayLike | None = None, database_modality: str | None = None) -> str:
    """Write a linear tower as a ``faiss.IndexPreTransform`` in one ``.faiss`` file.

    The index is ``LinearTransform(W, b)`` (followed by an L2 normalisation for the towers of
    ``distance="cosine"`` learners) in front of an ``IndexFlatL2``: ``faiss.read_index(path)``
    then adds and searches *raw* samples of ``modality``, and the results equal an exact
    search of ``transform_<modality>`` outputs (squared Euclidean distances in the embedding,
    the ``pair_distance`` of every learner scoring by ``‖f − g‖²``).

    Parameters
    ----------
    model : fitted pair learner with a linear tower
    path : str or os.PathLike
        Output file, written atomically.
    modality : {"x", "y"}, default="x"
        The modality the index embeds (that of the queries).
    database : array-like of shape (n, n_features), optional
        Samples stored in the index before it is written, embedded with the tower of
        ``database_modality`` (default: ``modality``): a gallery of the *other* modality for a
        cross-modal search with raw queries.
    database_modality : {"x", "y"}, optional

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    ValueError
        The model does not rank by the squared distance of its embeddings (GSM, DeepGSM), or
        its tower is not linear (kernel, mixture or deep towers).
    """
    from crossmetric._base import uses_l2_score
    from crossmetric.metrics._faiss_tools import faiss_module

    faiss = faiss_module()
    side = _check_modality(modality)
    check_is_fitted(model)
    if not uses_l2_score(model):
        raise ValueError(f"{type(model).__name__} scores pairs with its own function, not the "
                         "squared Euclidean distance between embeddings, so a faiss L2 index "
                         "cannot reproduce its ranking; use model.cross_distance.")
    steps = [] if _is_deep(model) else tower_steps(model, side)
    normalize = bool(steps) and steps[-1][0] == "l2_normalize"
    core = steps[:-1] if normalize else steps
    if len(core) != 1 or core[0][0] != "affine":
        raise ValueError(
            f"to_faiss needs a linear tower; the {side}-tower of {type(model).__name__} is "
            f"not one matrix (steps: {', '.join(s[0] for s in steps) or 'deep network'}); "
            "use to_onnx instead.")
    _, W, b = core[0]
    d_in, d_out = W.shape
    lt = faiss.LinearTransform(d_in, d_out, b is not None)
    faiss.copy_array_to_vector(np.ascontiguousarray(W.T, dtype=np.float32).ravel(), lt.A)
    if b is not None:
        faiss.copy_array_to_vector(np.asarray(b, dtype=np.float32), lt.b)
    lt.is_trained = True
    if normalize:  # chain: the linear map, then the L2 normalisation
        index = faiss.IndexPreTransform(faiss.NormalizationTransform(d_out, 2.0),
                                        faiss.IndexFlatL2(d_out))
        index.prepend_transform(lt)
    else:
        index = faiss.IndexPreTransform(lt, faiss.IndexFlatL2(d_out))
    if database is not None:
        db_side = side if database_modality is None else _check_modality(database_modality)
        Z = getattr(model, f"transform_{db_side}")(database)
        if Z.shape[1] != d_out:
            raise ValueError(f"database embeds to {Z.shape[1]} dimensions, the index has "
                             f"{d_out}.")
        faiss.downcast_index(index.index).add(np.ascontiguousarray(Z, dtype=np.float32))
        index.ntotal = index.index.ntotal
    data = faiss.serialize_index(index).tobytes()
    return _write_atomic(path, data)
