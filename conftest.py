"""Doctest collection of the package (``--doctest-modules``; pyproject's pytest options).

Modules that need an optional dependency are left out when it is not installed, so that the
default suite runs on the core install too; ``python -m crossmetric`` (``__main__``) runs the
command line on import and is never collected.
Doctests run single-threaded (BLAS and torch) to stay fast on a shared machine.
"""

import importlib.util
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

collect_ignore = ["crossmetric/__main__.py"]
_OPTIONAL = {
    "torch": ["crossmetric/deep"],
    "faiss": ["crossmetric/retrieval.py"],
    "skimage": ["crossmetric/features/__init__.py", "crossmetric/datasets/_image_folder.py",
                "crossmetric/features/_lomo.py",
                "crossmetric/features/_local_patterns.py",
                "crossmetric/features/_patch_color_sift.py"],
    "cv2": ["crossmetric/features/_dense_sift.py", "crossmetric/features/_patch_color_sift.py"],
    "PIL": ["crossmetric/datasets/_image_folder.py"],
    "dask": [],
    "onnx": ["crossmetric/export"],
    "onnxruntime": ["crossmetric/export"],
}
for _module, _paths in _OPTIONAL.items():
    if importlib.util.find_spec(_module) is None:
        collect_ignore += _paths

#: doctests of functions in core modules that call an optional dependency
_OPTIONAL_DOCTESTS = {"crossmetric.metrics.knn.knn_rank_report": "faiss"}


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        module = _OPTIONAL_DOCTESTS.get(item.name)
        if module is not None and importlib.util.find_spec(module) is None:
            item.add_marker(pytest.mark.skip(reason=f"needs {module}"))
