"""Saving a fitted :class:`~crossmetric.deep.model.DeepGSM`: TorchScript export and pickling.

:class:`SavingMixin` exports one tower as TorchScript (to embed a gallery without crossmetric)
and pickles the network as a CPU state dict (``_net_state_``), rebuilt from the parameters
on unpickling -- the form that ``crossmetric.persistence`` saves and that models saved
before load from.
"""

from __future__ import annotations

import inspect
import warnings

import torch
from sklearn.utils.validation import check_is_fitted

from crossmetric._utils.atomic_io import atomic_path
from crossmetric.deep.networks import GSMTower

__all__ = ["SavingMixin"]


class SavingMixin:
    """``export_torchscript``, ``__getstate__`` and ``__setstate__`` of DeepGSM.

    Comes before :class:`sklearn.base.BaseEstimator` in the bases, whose pickling hooks it
    replaces.
    """

    def export_torchscript(self, path, domain: str = "x") -> str:
        """Save one trained tower as TorchScript: embed a gallery without crossmetric.

        The saved module maps a float tensor of images ``(n, c, h, w)`` (values as in
        training: ``uint8`` images divided by 255) to x̃ or ỹ ``(n, 2r + 1)``; its method
        ``similarity(tx, ty)`` gives the matrix of S̃ (eq. 12) between the outputs of the
        first-domain and second-domain towers, and its buffer ``f`` the constant. Load with
        ``torch.jit.load(path)``. Paper networks are scripted; a user backbone that cannot
        be scripted is traced on a zero batch instead.

        Parameters
        ----------
        path : str or os.PathLike
        domain : {"x", "y"}

        Returns
        -------
        str
            ``path``.
        """
        check_is_fitted(self)
        if domain not in ("x", "y"):
            raise ValueError(f"domain must be 'x' or 'y', got {domain!r}.")
        tower = GSMTower(self.net_, domain, flip=bool(self.test_flip)).cpu().eval()
        with warnings.catch_warnings():
            # torch >= 2.10 marks TorchScript deprecated (in favour of torch.export); it still
            # works and is what C++ / older runtimes load
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                scripted = torch.jit.script(tower)
            except Exception:  # noqa: BLE001 - torch raises many types for unscriptable code
                c = self.channels_[0 if domain == "x" else 1]
                scripted = torch.jit.trace(tower, torch.zeros(2, c, *self.input_shape_))
            with atomic_path(path) as tmp:
                scripted.save(tmp)
        return str(path)

    # ------------------------------------------------------------------------ pickling
    def __getstate__(self):
        state = self.__dict__.copy()
        net = state.pop("net_", None)
        if net is not None:
            state["_net_state_"] = {k: v.detach().cpu() for k, v in net.state_dict().items()}
            state["device_"] = str(self.device_)
        return state

    def __setstate__(self, state):
        net_state = state.pop("_net_state_", None)
        # a model pickled before a parameter existed gets its default (get_params, clone)
        for name, par in inspect.signature(type(self).__init__).parameters.items():
            if name not in state and par.default is not inspect.Parameter.empty:
                state[name] = par.default
        scores = state.get("validation_scores_")
        if scores and isinstance(scores[0], (tuple, list)):
            # pickled before validation_scores_ held floats: (iteration, rank-1) pairs
            state["validation_scores_"] = [float(s) for _, s in scores]
            state["validation_iterations_"] = [int(i) for i, _ in scores]
        self.__dict__.update(state)
        if net_state is not None:
            dev = torch.device(state["device_"])
            if dev.type == "cuda" and not torch.cuda.is_available():
                dev = torch.device("cpu")
            net = self._build_net(self.input_shape_, getattr(self, "channels_", (1, 1)))
            net.load_state_dict(net_state)
            net.to(dev).eval()
            self.net_ = net
            self.device_ = dev
