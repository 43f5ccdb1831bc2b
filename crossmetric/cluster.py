"""Run crossmetric's protocols on a Dask cluster (extra ``crossmetric[dask]``).

The protocol runner (:func:`crossmetric.protocols.run_protocols`, ``run_pair_folds``) fits each
split through joblib, and draws all randomness before dispatching, so the joblib backend only
decides *where* a split runs, never its result. :func:`dask_backend` points joblib at a Dask
cluster:

* ``dask_backend()`` starts a :class:`dask.distributed.LocalCluster` of worker *processes*
  (``n_workers`` processes of ``threads_per_worker`` threads each) for the duration of the
  ``with`` block;
* ``dask_backend("tcp://scheduler:8786")`` connects to an existing cluster instead (started
  with ``dask scheduler`` and ``dask worker tcp://scheduler:8786`` on the machines, each with
  crossmetric installed at the same version). The data travel to the workers with each task.

Example::

    from crossmetric.cluster import dask_backend
    with dask_backend(n_workers=2):
        result = run_protocols(estimators, dataset)

From the command line: ``crossmetric benchmark --dask-workers 2`` or
``crossmetric benchmark --dask-scheduler tcp://host:8786``.
"""

from __future__ import annotations

from contextlib import contextmanager

__all__ = ["dask_backend"]


@contextmanager
def dask_backend(scheduler: str | None = None, *, n_workers: int = 2,
                 threads_per_worker: int = 1):
    """Context in which joblib (and so the protocol runner) runs on a Dask cluster.

    Parameters
    ----------
    scheduler : str, optional
        Address of an existing scheduler (``"tcp://host:8786"``). ``None``: start a local
        cluster of worker processes, closed on exit.
    n_workers, threads_per_worker : int, default=2, 1
        Size of the local cluster (ignored with ``scheduler``).

    Yields
    ------
    distributed.Client
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError("dask_backend needs dask.distributed: "
                          "pip install 'crossmetric[dask]'.") from exc
    from joblib import parallel_config

    from crossmetric._utils.checks import check_positive_int

    if scheduler is not None:
        if not isinstance(scheduler, str) or not scheduler:
            raise ValueError(f"scheduler must be an address such as 'tcp://host:8786', got "
                             f"{scheduler!r}.")
        with Client(scheduler) as client, parallel_config(backend="dask"):
            yield client
        return
    n_workers = check_positive_int(n_workers, "n_workers")
    threads_per_worker = check_positive_int(threads_per_worker, "threads_per_worker")
    with LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                      processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client, parallel_config(backend="dask"):
        yield client
