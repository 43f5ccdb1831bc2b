"""ONNX graph pieces for :mod:`crossmetric.export`: a tower's steps as ONNX nodes.

A tower is described as a list of steps (plain tuples of NumPy arrays, see
:func:`crossmetric.export.tower_steps`); :func:`build_model` turns them into one ONNX graph with
the ``onnx`` package's ``helper`` functions. The graph takes a float32 batch, computes in float64
(so that kernels and mixtures match the library's NumPy code to ~1e-12 before the final cast)
and returns float32.

Steps:

* ``("affine", W, b)`` -- ``Z ↦ Z @ W + b`` (``b`` may be ``None``)
* ``("kernel", kind, S, gamma)`` -- kernel rows ``K(Z, S)`` for ``linear`` / ``rbf`` / ``chi2`` /
  ``chi2_rbf`` (:mod:`crossmetric.kernels`)
* ``("centre", col_mean, total_mean)`` -- centred kernel rows
  ``K − col_mean − rowmean(K) + total_mean``
* ``("l2_normalize",)`` -- rows divided by their norm (zero rows left as they are)
* ``("clml", gmm_affine, gmm, min_assignment, max_assignments, W, b, k)`` -- CLML's
  soft-assignment-weighted local maps ``Σ_s q_s(x) (L_s x + b_s)``
"""

from __future__ import annotations

import math

import numpy as np

OPSET = 17


class GraphBuilder:
    """Nodes and float64 initialisers of one graph, with fresh names."""

    def __init__(self):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes, self.initializers, self._count = [], [], 0

    def _name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count}"

    def const(self, value, prefix: str = "c", dtype=np.float64) -> str:
        name = self._name(prefix)
        arr = np.ascontiguousarray(np.asarray(value, dtype=dtype))
        self.initializers.append(self.numpy_helper.from_array(arr, name))
        return name

    def ints(self, values) -> str:
        return self.const(np.asarray(values, dtype=np.int64), "i", dtype=np.int64)

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        out = self._name(op_type.lower())
        self.nodes.append(self.helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    # -------------------------------------------------------------- small compositions
    def row_sum(self, z: str, axis: int = 1, keepdims: int = 1) -> str:
        return self.op("ReduceSum", z, self.ints([axis]), keepdims=keepdims)

    def ones_like_rows(self, z: str) -> str:
        """An (n, 1) column of ones for the n rows of ``z``."""
        return self.op("Add", self.op("Mul", self.row_sum(z), self.const(0.0)), self.const(1.0))


def _affine(g: GraphBuilder, z: str, W: np.ndarray, b) -> str:
    z = g.op("MatMul", z, g.const(W, "W"))
    return z if b is None else g.op("Add", z, g.const(b, "b"))


def _kernel(g: GraphBuilder, z: str, kind: str, S: np.ndarray, gamma) -> str:
    if kind == "linear":
        return g.op("MatMul", z, g.const(S.T, "S"))
    if kind == "rbf":
        zz = g.row_sum(g.op("Mul", z, z))
        d2 = g.op("Add", g.op("MatMul", z, g.const(-2.0 * S.T, "S")), zz)
        d2 = g.op("Add", d2, g.const(np.einsum("ij,ij->i", S, S)[None, :], "ss"))
        d2 = g.op("Max", d2, g.const(0.0))
        return g.op("Exp", g.op("Mul", d2, g.const(-float(gamma))))
    if kind in ("chi2", "chi2_rbf"):
        # (n, 1, d) against (1, m, d); 0/0 terms count 0 (both features zero)
        ze = g.op("Unsqueeze", z, g.ints([1]))
        s3 = g.const(S[None, :, :], "S")
        den = g.op("Add", ze, s3)
        safe = g.op("Where", g.op("Equal", den, g.const(0.0)), g.const(1.0), den)
        if kind == "chi2":
            num = g.op("Mul", g.op("Mul", ze, s3), g.const(2.0))
            return g.row_sum(g.op("Div", num, safe), axis=2, keepdims=0)
        diff = g.op("Sub", ze, s3)
        dist = g.row_sum(g.op("Div", g.op("Mul", diff, diff), safe), axis=2, keepdims=0)
        return g.op("Exp", g.op("Mul", dist, g.const(-float(gamma))))
    raise ValueError(f"kernel {kind!r} has no ONNX form; expected linear, rbf, chi2 or "
                     "chi2_rbf.")


def _centre(g: GraphBuilder, k: str, col: np.ndarray, total: float) -> str:
    mean = g.op("Mul", g.row_sum(k), g.const(1.0 / col.shape[0]))
    k = g.op("Add", g.op("Sub", k, g.const(col[None, :], "col")), g.const(float(total)))
    return g.op("Sub", k, mean)


def _complement(g: GraphBuilder, z: str, x: str, Q: np.ndarray, scale: float,
                inserts: tuple) -> str:
    """``z`` with ``scale · (x − x Q Qᵀ)`` of the input ``x`` inserted before each column
    index of ``inserts`` (appended when there is none)."""
    rest = g.op("Mul", g.op("Sub", x, g.op("MatMul", g.op("MatMul", x, g.const(Q, "Q")),
                                           g.const(Q.T, "Qt"))), g.const(scale))
    if not inserts:
        return g.op("Concat", z, rest, axis=1)
    bounds = [0, *inserts, np.iinfo(np.int64).max]
    parts = []
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        parts.append(g.op("Slice", z, g.ints([a]), g.ints([b]), g.ints([1])))
        if k < len(inserts):
            parts.append(rest)
    return g.op("Concat", *parts, axis=1)


def _l2_normalize(g: GraphBuilder, z: str) -> str:
    norm = g.op("Sqrt", g.row_sum(g.op("Mul", z, z)))
    safe = g.op("Where", g.op("Greater", norm, g.const(0.0)), norm, g.const(1.0))
    return g.op("Div", z, safe)


def gmm_terms(gmm) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A scikit-learn ``GaussianMixture`` as ``(P, c, const)``: the weighted log density of
    component s is ``const[s] − ½ ‖x P_s − c_s‖²`` for every covariance type, with the
    precision Cholesky factors ``P_s`` stacked as ``P`` (d, k·d) and ``c_s = μ_s P_s``."""
    k, d = gmm.means_.shape
    pc = np.asarray(gmm.precisions_cholesky_, dtype=np.float64)
    ctype = gmm.covariance_type
    if ctype == "full":
        Ps = pc
    elif ctype == "tied":
        Ps = np.broadcast_to(pc, (k, d, d))
    elif ctype == "diag":
        Ps = np.stack([np.diag(p) for p in pc])
    else:  # spherical
        Ps = pc[:, None, None] * np.eye(d)[None]
    log_det = np.array([np.sum(np.log(np.diag(P))) for P in Ps])
    P = np.concatenate(list(Ps), axis=1)
    c = np.concatenate([gmm.means_[s] @ Ps[s] for s in range(k)])
    const = -0.5 * d * math.log(2.0 * math.pi) + log_det + np.log(gmm.weights_)
    return P, c, const


def _scatter_mask(g: GraphBuilder, like: str, idx: str, ones: str) -> str:
    """Boolean (n, k) mask, True at the column indices ``idx`` of each row."""
    zeros = g.op("Mul", like, g.const(0.0))
    return g.op("Cast", g.op("ScatterElements", zeros, idx, ones, axis=1), to=9)  # BOOL


def _clml(g: GraphBuilder, z: str, gmm_affine, gmm_parts, min_assignment: float,
          max_assignments, W: np.ndarray, b: np.ndarray, k: int) -> str:
    G = z if gmm_affine is None else _affine(g, z, *gmm_affine)
    P, c, const = gmm_parts
    d = P.shape[0]
    y = g.op("Sub", g.op("MatMul", G, g.const(P, "prec")), g.const(c, "mu"))
    y = g.op("Reshape", y, g.ints([-1, k, d]))
    sq = g.row_sum(g.op("Mul", y, y), axis=2, keepdims=0)
    logp = g.op("Add", g.op("Mul", sq, g.const(-0.5)), g.const(const, "logw"))
    post = g.op("Softmax", logp, axis=1)
    # sparsify_assignments: the top max_assignments (lower index first among ties, as
    # ONNX TopK), those >= min_assignment, and always the largest; renormalised
    m = k if max_assignments is None else min(int(max_assignments), k)
    top_vals = g._name("topv")
    top_idx = g._name("topi")
    g.nodes.append(g.helper.make_node("TopK", [post, g.ints([m])], [top_vals, top_idx],
                                      axis=1, largest=1, sorted=1))
    ones_m = g.op("Add", g.op("Mul", top_vals, g.const(0.0)), g.const(1.0))
    top = _scatter_mask(g, post, top_idx, ones_m)
    first_idx = g.op("Slice", top_idx, g.ints([0]), g.ints([1]), g.ints([1]))
    first = _scatter_mask(g, post, first_idx, g.ones_like_rows(post))
    keep = g.op("Or", g.op("GreaterOrEqual", post, g.const(float(min_assignment))), first)
    keep = g.op("And", keep, top)
    q = g.op("Where", keep, post, g.const(0.0))
    q = g.op("Div", q, g.row_sum(q))
    local = g.op("Reshape", _affine(g, z, W, b), g.ints([-1, k, W.shape[1] // k]))
    weighted = g.op("Mul", local, g.op("Unsqueeze", q, g.ints([2])))
    return g.row_sum(weighted, axis=1, keepdims=0)


def build_model(steps, input_shape: tuple, input_name: str, doc: str):
    """The ONNX ``ModelProto`` of ``steps`` on a float32 input ``(n, *input_shape)``."""
    from onnx import TensorProto, checker, helper

    g = GraphBuilder()
    z = x = g.op("Cast", input_name, to=TensorProto.DOUBLE)
    for step in steps:
        kind, args = step[0], step[1:]
        if kind == "affine":
            z = _affine(g, z, *args)
        elif kind == "kernel":
            z = _kernel(g, z, *args)
        elif kind == "centre":
            z = _centre(g, z, *args)
        elif kind == "l2_normalize":
            z = _l2_normalize(g, z)
        elif kind == "clml":
            z = _clml(g, z, *args)
        elif kind == "complement":
            z = _complement(g, z, x, *args)
        else:  # pragma: no cover - tower_steps only makes the kinds above
            raise ValueError(f"unknown tower step {kind!r}.")
    g.nodes.append(helper.make_node("Cast", [z], ["embedding"], to=TensorProto.FLOAT))
    graph = helper.make_graph(
        g.nodes, "crossmetric_tower",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT,
                                       ["n", *map(int, input_shape)])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["n", None])],
        g.initializers)
    model = helper.make_model(graph, producer_name="crossmetric",
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.doc_string = doc
    model.ir_version = min(model.ir_version, 9)
    checker.check_model(model)
    return model
