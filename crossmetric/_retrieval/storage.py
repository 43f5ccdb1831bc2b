"""Saving and loading an :class:`~crossmetric.retrieval.Index` (crossmetric's safe format;
the faiss part as ``faiss.serialize_index`` bytes), and reading the joblib files of old
versions."""

from __future__ import annotations

import copy
import os
from typing import Self

import numpy as np

from crossmetric.metrics._faiss_tools import faiss_module, strip_model, to_cpu, to_device

__all__ = ["IndexStorage"]


class IndexStorage:
    """Persistence: one file per index; loading runs no code from it."""

    def save(self, path: str | os.PathLike) -> None:
        """Write the index -- parameters, model and vectors -- to the single file ``path``.

        The file is crossmetric's safe format (:mod:`crossmetric.persistence`: an ``.npz``
        archive and a JSON header; loading it runs no code), written atomically: the faiss
        vectors (``faiss.serialize_index``) and the metadata are one file, so an interrupted
        save leaves the previous file whole. The model is saved without its ``preprocessor``
        (its training samples).
        """
        from crossmetric.persistence import save_object

        out = copy.copy(self)
        out.model = strip_model(self.model)
        save_object(path, out, kind="index")

    @classmethod
    def load(cls, path: str | os.PathLike, *, allow_pickle: bool = False) -> Self:
        """Read an index written by :meth:`save`; nothing from the file runs.

        ``allow_pickle=True`` also reads the joblib index files (and their ``.faiss`` part) of
        older crossmetric versions -- UNSAFE, a pickle runs the code it names; only for files
        you trust (then :meth:`save` it again).
        """
        from crossmetric.persistence import check_model_state, load_object

        path = os.fspath(path)
        index, header = load_object(path, kind="index", allow_pickle=allow_pickle)
        if header is None:  # an old joblib index, read with allow_pickle=True
            return cls._from_old_payload(path, index)
        if not isinstance(index, cls):
            raise ValueError(f"{path}: holds a {type(index).__name__}, not an Index.")
        if getattr(index, "model", None) is not None:  # its model's state must work
            check_model_state(path, index.model, what="index file (its model)")
        return index

    @classmethod
    def _from_old_payload(cls, path: str, payload) -> Self:
        if not isinstance(payload, dict) or "state" not in payload:
            raise ValueError(f"{path} is not a crossmetric.retrieval.Index file.")
        index = cls.__new__(cls)
        index.__dict__.update(payload["state"])
        index._index = None
        if payload.get("has_index"):
            if not os.path.exists(path + ".faiss"):
                raise ValueError(f"{path}.faiss (the faiss index written by save) is missing.")
            index._index = to_device(faiss_module().read_index(path + ".faiss"), index.device)
        return index

    def __getstate__(self):
        """Plain data: the faiss index as ``faiss.serialize_index`` bytes (uint8 array)."""
        state = self.__dict__.copy()
        native = state.pop("_index", None)
        state["_faiss_bytes_"] = (None if native is None
                                  else np.asarray(faiss_module().serialize_index(to_cpu(native))))
        return state

    def __setstate__(self, state):
        state = dict(state)
        blob = state.pop("_faiss_bytes_", None)
        self.__dict__.update(state)
        self._index = None
        if blob is not None:
            blob = np.asarray(blob)
            if blob.dtype != np.uint8 or blob.ndim != 1:
                raise ValueError("the faiss part of the index is not a byte array.")
            try:
                native = faiss_module().deserialize_index(np.ascontiguousarray(blob))
            except RuntimeError as exc:
                raise ValueError(f"the faiss part of the index is corrupt: "
                                 f"{str(exc).splitlines()[0]}") from None
            self._index = to_device(native, self.device)
