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
in ``_data``.

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

from crossmetric.cli._common import CLIError
from crossmetric.cli._entry import main
from crossmetric.cli.parser import build_parser

__all__ = ["main", "build_parser", "CLIError"]
