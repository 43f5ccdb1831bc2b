"""crossmetric.cluster.dask_backend and the CLI's --dask-* options (argument errors; the
process-cluster run itself is the slow test in test_protocols.py)."""

import pytest

pytest.importorskip("distributed")

from crossmetric.cli import main  # noqa: E402
from crossmetric.cluster import dask_backend  # noqa: E402


def test_dask_backend_argument_errors():
    with pytest.raises(ValueError, match="n_workers"):
        with dask_backend(n_workers=0):
            pass
    with pytest.raises(ValueError, match="scheduler"):
        with dask_backend(scheduler=""):
            pass


def test_cli_dask_workers_error(tmp_path, capsys):
    rc = main(["benchmark", "--methods", "euclidean", "--repeats", "1", "--folds", "2",
               "--out", str(tmp_path), "--no-progress", "--dask-workers", "0"])
    assert rc == 2
    assert "--dask-workers" in capsys.readouterr().err
