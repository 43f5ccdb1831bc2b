"""GSM's parameter tying: a structure's free parameters → ``(L_A, L_B, L_Cx, L_Cy, d, e, f)``.

One definition for both implementations of the generalized similarity model: NumPy arrays
(:func:`crossmetric.learners.gsm.gsm_components`, the feature-based ``GSM``) and torch tensors
(:class:`crossmetric.deep.networks.SimilarityHead`, ``DeepGSM``; autograd then gives the chain
rule that ``GSM`` writes out by hand). Only ``@``, ``.T``, ``+``, ``-`` and ``*`` are used on
the parameters, so the function runs unchanged on either kind of array; the caller supplies
the zeros of its own kind and the scalar type of the offsets added to ``f``.

The structures (:data:`crossmetric.learners.gsm.STRUCTURES`, §5.5 of Lin et al.):

* ``generalized``, eq. (1)-(3): every matrix and vector free;
* ``linear``: no affine terms, ``d = e = 0`` (and ``f = 0``, set by the caller);
* ``ladf``, eq. (8): ``L_B = L_A``, ``e = d``;
* ``joint_bayesian``, eq. (9): ``L_B = L_A``, ``d = e = 0``;
* ``euclidean`` (Baseline-1): ``‖(Ux + a) − (Vy + b)‖² + f`` with ``c = a − b``;
* ``inner_product`` (Baseline-2): ``−2 (Ux + a)ᵀ(Vy + b) + f``.
"""

from __future__ import annotations

__all__ = ["tied_components"]


def tied_components(params, structure: str, f, zeros, scalar):
    """``(L_A, L_B, L_Cx, L_Cy, d, e, f)`` of eq. (2)-(3) from a structure's free parameters.

    Parameters
    ----------
    params : mapping of str to array or tensor
        The free parameters of ``structure`` (:data:`crossmetric.learners.gsm.STRUCTURES`).
    structure : str
    f : float or tensor
        The constant before the structure's own offset (the baselines add theirs to it).
    zeros : callable
        ``zeros(kind)``: zeros of the caller's array type, ``kind`` one of ``"x"`` (the
        ``p_x`` vector d), ``"y"`` (the ``p_y`` vector e), ``"Lx"`` (``(r, p_x)``) and
        ``"Ly"`` (``(r, p_y)``).
    scalar : callable
        Applied to the baselines' offsets ``cᵀc`` / ``aᵀb`` before they are added to ``f``
        (``float`` for NumPy, the identity for torch, where ``f`` carries gradient).

    Returns
    -------
    LA, LB, LCx, LCy, d, e, f
    """
    if structure in ("generalized", "linear"):
        LA, LB, LCx, LCy = params["LA"], params["LB"], params["LCx"], params["LCy"]
        if structure == "generalized":
            d, e = params["d"], params["e"]
        else:
            d, e = zeros("x"), zeros("y")
    elif structure in ("ladf", "joint_bayesian"):
        LA, LCx, LCy = params["LA"], params["LCx"], params["LCy"]
        LB = LA
        d = params["d"] if structure == "ladf" else zeros("x")
        e = d
    elif structure == "euclidean":
        U, V, c = params["U"], params["V"], params["c"]
        # ‖Ux − Vy + c‖² = ‖Ux‖² + ‖Vy‖² − 2(Ux)ᵀ(Vy) + 2 (Uᵀc)ᵀx − 2 (Vᵀc)ᵀy + ‖c‖²
        LA, LB, LCx, LCy = U, V, U, V
        d, e = U.T @ c, -(V.T @ c)
        f = f + scalar(c @ c)
    elif structure == "inner_product":
        U, V, a, b = params["U"], params["V"], params["a"], params["b"]
        # −2 (Ux + a)ᵀ(Vy + b) = −2(Ux)ᵀ(Vy) − 2 (Uᵀb)ᵀx − 2 (Vᵀa)ᵀy − 2 aᵀb
        LA, LB = zeros("Lx"), zeros("Ly")
        LCx, LCy = U, V
        d, e = -(U.T @ b), -(V.T @ a)
        f = f - 2.0 * scalar(a @ b)
    else:
        raise ValueError(f"unknown structure {structure!r}")
    return LA, LB, LCx, LCy, d, e, f
