r"""The ``crossmetric`` command line: benchmark, fit, evaluate, search, reproduce and features.

A thin front end that parses, calls the library and prints: every step is a library function
(:mod:`crossmetric.protocols`, :mod:`crossmetric.registry`, :mod:`crossmetric.datasets`,
:mod:`crossmetric.metrics`, :mod:`crossmetric.plotting`, :mod:`crossmetric.retrieval`). Bad
input -- unreadable files, wrong shapes, unknown method names, bad options -- ends with a
one-line message on stderr and exit code 2, never a traceback (set ``CROSSMETRIC_DEBUG=1`` to
see one).

One module per command (:mod:`~crossmetric.cli.benchmark`, :mod:`~crossmetric.cli.fit`,
:mod:`~crossmetric.cli.evaluate`, :mod:`~crossmetric.cli.search`,
:mod:`~crossmetric.cli.reproduce`, :mod:`~crossmetric.cli.features`), the argument parser in
:mod:`~crossmetric.cli.parser`, what they share in ``_common`` and the benchmark's data sources
in ``_data``. Every name of the former one-module ``crossmetric/cli.py`` is still an attribute
of this package; a command finds the library functions that tests replace
(``_write_benchmark_files``) here, so that monkeypatching ``crossmetric.cli.NAME`` still works.

Examples
--------
::

    crossmetric benchmark                                  # every method, embedded digits
    crossmetric benchmark --methods euclidean,pcca --folds 5 --repeats 3 --out res/
    crossmetric benchmark --dataset mfeat:fou,pix --data-home ../shared/data/mfeat
    crossmetric benchmark --x photos.npy --y sketches.csv --labels ids.txt   # your own data
    crossmetric benchmark --x faces.npy --labels ids.txt                     # one modality
    crossmetric benchmark --images photos/ --pattern '(?P<id>\d+)_(?P<domain>[ab])\.png'
    crossmetric benchmark --dataset viper --data-home ../shared/data/viper
    crossmetric benchmark --lfw-pairs pairs.txt --x lfw_feats.npy --image-list names.txt
    crossmetric fit cmml --x photos.npy --y sketches.npy --pairs train.csv --out cmml.model
    crossmetric evaluate cmml.model --x photos.npy --y sketches.npy --pairs test.csv
    crossmetric evaluate cmml.model --x probes.npy --y gallery.npy \
        --probe-labels p.txt --gallery-labels g.txt --scores scores.csv
    crossmetric search cmml.model --database sketches.npy --queries photos.npy -k 10
    crossmetric reproduce --list
    crossmetric reproduce pcca-viper --data-home ../shared/data --out viper/
"""

from __future__ import annotations

# the names of the former crossmetric/cli.py, private ones included (tests import and
# monkeypatch them here)
from crossmetric.cli._common import (  # noqa: F401
    _DESCRIPTORS,
    CLIError,
    _check_int,
    _check_output_dir,
    _check_output_file,
    _check_pair_rows,
    _load_array,
    _load_label_file,
    _load_model,
    _load_pairs,
    _one_line,
    _parse_params,
    _parse_size,
    _preprocessor,
    _save_model,
)
from crossmetric.cli._data import (  # noqa: F401
    _describe_images,
    _images_to_dataset,
    _load_named_dataset,
    _own_dataset,
)
from crossmetric.cli._entry import _sigterm_unwinds, _Terminated, main  # noqa: F401
from crossmetric.cli.benchmark import (  # noqa: F401
    _BENCHMARK_FILES,
    _cap_components,
    _method_kind,
    _method_list,
    _print_method_list,
    _resolve_benchmark_config,
    _validate_benchmark,
    _write_benchmark_files,
    cmd_benchmark,
)
from crossmetric.cli.evaluate import (  # noqa: F401
    _identification,
    _load_pictures,
    _parse_ranks,
    _show_ranks,
    _validate_evaluate,
    cmd_evaluate,
)
from crossmetric.cli.features import _ANY_IMAGE, cmd_features  # noqa: F401
from crossmetric.cli.fit import _fit_pairs, cmd_fit  # noqa: F401
from crossmetric.cli.parser import (  # noqa: F401
    _methods_epilog,
    _Parser,
    _quiet_options,
    build_parser,
)
from crossmetric.cli.reproduce import cmd_reproduce  # noqa: F401
from crossmetric.cli.search import _exhaustive_search, _write_search_csv, cmd_search  # noqa: F401
from crossmetric.persistence import atomic_open  # noqa: F401

__all__ = ["main", "build_parser", "CLIError"]
