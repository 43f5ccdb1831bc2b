"""The argument parser of ``crossmetric``: one function per sub-command."""

from __future__ import annotations

import argparse

from crossmetric.cli._common import CLIError
from crossmetric.cli.benchmark import cmd_benchmark
from crossmetric.cli.evaluate import cmd_evaluate
from crossmetric.cli.features import cmd_features
from crossmetric.cli.fit import cmd_fit
from crossmetric.cli.reproduce import cmd_reproduce
from crossmetric.cli.search import cmd_search
from crossmetric.features._image_views import DESCRIPTORS as _DESCRIPTORS


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``crossmetric: error: ...``) and exit code 2; no
    prefix matching of long options (``--fold 3`` is not taken for ``--folds``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D401 - argparse hook
        raise CLIError(f"{message} (see '{self.prog} --help')")


# ------------------------------------------------------------------------------- parser
def _quiet_options(group, text: str) -> None:
    """``--quiet`` / ``-q``, the one spelling of every sub-command that shows progress (the
    older ``--no-progress`` is kept as a hidden alias)."""
    group.add_argument("--quiet", "-q", dest="quiet", action="store_true", default=None,
                       help=text)
    group.add_argument("--no-progress", dest="quiet", action="store_true", default=None,
                       help=argparse.SUPPRESS)


def _methods_epilog() -> str:
    from crossmetric.registry import METHODS

    lines = ["methods (settings: 'crossmetric benchmark --list'):"]
    for name, spec in METHODS.items():
        lines.append(f"  {name:10s} {spec.display:10s} {spec.note[:60]}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``crossmetric`` (sub-commands benchmark, fit, evaluate, search)."""
    p = _Parser(prog="crossmetric",
                description="Cross-modal and single-modal metric learning from pairs.")
    from crossmetric import __version__

    p.add_argument("--version", action="version", version=f"crossmetric {__version__}",
                   help="print the version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for add in (_add_benchmark, _add_fit, _add_evaluate, _add_search, _add_reproduce,
                _add_features):
        add(sub)
    return p


class _RAW(argparse.RawDescriptionHelpFormatter):
    """The description as written; option help wrapped at spaces only, so that names such as
    ``patch-color-sift`` or ``--n-jobs`` are never split at a hyphen."""

    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _add_benchmark(sub) -> None:
    b = sub.add_parser("benchmark", help="compare methods under the papers' protocols",
                       formatter_class=_RAW,
                       description="Run methods under k-fold verification and repeated "
                                   "gallery/probe identification; print a table and write "
                                   "results.csv, results.json, results.md, results.tex, "
                                   "roc.png, cmc.png and config.toml (the resolved settings; "
                                   "give it back with --config to repeat the run).\n\nData "
                                   "(one source): --dataset NAME | "
                                   "--x FILE [--y FILE] --labels FILE [--instance FILE] | "
                                   "--images DIR --pattern REGEX | --lfw-pairs FILE --x FILE "
                                   "--image-list FILE.\n\nEvery option can also be set in a "
                                   "TOML file (--config): options in a [benchmark] table, "
                                   "learner parameters in [methods.NAME] tables, descriptor "
                                   "parameters in a [descriptor] table; the command line wins "
                                   "over the file (crossmetric.config).",
                       epilog=_methods_epilog())
    # defaults are None here and filled by crossmetric.config.resolve_config, so that an
    # option given on the command line is told apart from the configuration file's
    _benchmark_data_options(b.add_argument_group("data"))
    r = b.add_argument_group("protocol")
    _benchmark_protocol_options(r)
    _benchmark_output_options(b.add_argument_group("output"))
    _benchmark_tune_options(r)
    b.set_defaults(func=cmd_benchmark)


def _benchmark_data_options(d) -> None:
    d.add_argument("--dataset", default=None,
                   help="'digits' (embedded, the default), 'mfeat:V1,V2' (e.g. mfeat:fou,pix), "
                        "'viper' or 'pku-sketch' (with --data-home); the re-id layouts "
                        "'market1501', 'dukemtmc', 'msmt17', 'cuhk03[:labeled]' (their own "
                        "train / query / gallery split and camera ids; images read at --size, "
                        "default 64x128)")
    d.add_argument("--data-home", default=None,
                   help="folder of the --dataset files (mfeat-*, VIPeR, PKU sketch, "
                        "Market-1501's bounding_box_train/ ...)")
    d.add_argument("--x", default=None, metavar="FILE",
                   help="your features, one row per object: .npy, .npz (see --key), .csv or "
                        "whitespace-separated text (UCI layout)")
    d.add_argument("--y", default=None, metavar="FILE",
                   help="second modality, row r = the same object as row r of --x; leave out "
                        "for single-modal data")
    d.add_argument("--labels", default=None, metavar="FILE",
                   help="identity (class) of each row: one label per line, or .npy")
    d.add_argument("--instance", default=None, metavar="FILE",
                   help="object id of each row, for instance-level matching (implies "
                        "--level instance unless --level is given)")
    d.add_argument("--key", default=None, help="array name inside .npz feature files")
    d.add_argument("--images", default=None, metavar="DIR",
                   help="folder of images (loaded by crossmetric.datasets.load_image_folder)")
    d.add_argument("--pattern", default=None, metavar="REGEX",
                   help="regular expression on each image's path relative to --images, with "
                        "a named group 'id' and optionally 'domain' (two values = two "
                        "modalities) and 'cam' (camera: identification leaves out the gallery "
                        "items of the probe's identity and camera)")
    d.add_argument("--descriptor", choices=_DESCRIPTORS, default=None, metavar="NAME",
                   help="image features. Faces / sketches: hog (default for --images, "
                        "pku-sketch), dense-sift (sides >= 160 px), lbp, ltp. Re-id, sized "
                        "for 48x128 crops (--size 48x128): lomo, strips (default for viper; "
                        "square-rooted colour and LBP histograms, normalize='root'), "
                        "patch-color-sift (129,024 features at 48x128, more on larger "
                        "images). pixels: grey levels")
    d.add_argument("--descriptor-param", dest="descriptor_params", action="append",
                   default=None, metavar="NAME=VALUE",
                   help="a parameter of the descriptor's class in crossmetric.features, e.g. "
                        "threshold=3 for ltp (repeatable; VALUE is a TOML literal; wins over "
                        "the --config file's [descriptor] table)")
    d.add_argument("--size", default=None, metavar="WxH",
                   help="resize images to WIDTHxHEIGHT pixels (e.g. 48x128)")
    d.add_argument("--lfw-pairs", default=None, metavar="FILE",
                   help="LFW restricted protocol: pairs.txt (its folds are used), with --x "
                        "features and --image-list")
    d.add_argument("--image-list", default=None, metavar="FILE",
                   help="image name of each --x row (e.g. Aaron_Peirsol_0001.jpg), for "
                        "--lfw-pairs")


def _benchmark_protocol_options(r) -> None:
    from crossmetric.config import BENCHMARK_OPTIONS as dflt

    r.add_argument("--config", default=None, metavar="FILE",
                   help="TOML file of options ([benchmark]) and learner parameters "
                        "([methods.NAME]); e.g. a config.toml written by an earlier run")
    r.add_argument("--param", action="append", default=None, metavar="METHOD.NAME=VALUE",
                   help="a learner parameter, e.g. gsm.mu=1e-3 (repeatable; VALUE is a TOML "
                        "literal; wins over --config)")
    r.add_argument("--methods", default=None,
                   help="comma-separated method names, or 'all' (default: every method "
                        "except the papers' extra baselines itml, nca, lmnn, mcc, prdc; "
                        "see --list)")
    r.add_argument("--folds", type=int, default=None,
                   help=f"verification folds (default {dflt['folds'].default}, as LFW)")
    r.add_argument("--repeats", type=int, default=None,
                   help=f"identification repetitions (default {dflt['repeats'].default}, as "
                        "VIPeR / CUFSF)")
    r.add_argument("--protocol", choices=dflt["protocol"].choices, default=None,
                   help="which protocols to run (default both: verification and "
                        "identification; retrieval: class-level cross-modal retrieval, mAP "
                        "x->y and y->x over the whole test set)")
    _benchmark_split_options(r)
    r.add_argument("--level", choices=dflt["level"].choices, default=None,
                   help="identity of a pair: the class label (default) or the object "
                        "(photo <-> sketch of the same image; needs instance ids)")
    r.add_argument("--n-negatives", type=int, default=None,
                   help="negative training pairs per positive (default "
                        f"{dflt['n_negatives'].default})")
    r.add_argument("--max-train-positives", type=int, default=None,
                   help="positive training pairs per split (default "
                        f"{dflt['max_train_positives'].default})")
    r.add_argument("--n-jobs", type=int, default=None,
                   help="parallel workers (default -1: all cores; Python's run_protocols "
                        "defaults to one process)")
    r.add_argument("--dask-scheduler", metavar="ADDRESS", default=None,
                   help="run the splits on an existing Dask cluster (tcp://host:8786)")
    r.add_argument("--dask-workers", type=int, default=None, metavar="N",
                   help="run the splits on a local Dask cluster of N worker processes")
    r.add_argument("--seed", type=int, default=None,
                   help=f"random seed of splits, pairs and learners (default "
                        f"{dflt['seed'].default})")


def _test_size(text: str):
    """``--test-size``: an integer count or a float share (argparse type)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count (e.g. 100) or a share (e.g. 0.3), "
                                         f"got {text!r}") from None


def _benchmark_split_options(r) -> None:
    """Who is tested and from which side: --test-size, --probe-domain, a fixed split."""
    r.add_argument("--test-size", type=_test_size, default=None, metavar="N|SHARE",
                   help="identification / retrieval test set of each repeat: a count of "
                        "identities (e.g. 100) or a share of them (e.g. 0.5; default 0.3); "
                        "with few identities (< 20), and always for --protocol retrieval, "
                        "a count or share of the rows, stratified by label")
    r.add_argument("--probe-domain", default=None, metavar="NAME",
                   help="identification: the domain (image folder's 'domain' group, mfeat "
                        "view) or side (x, y) whose test items are the probes; the other is "
                        "the gallery (default: x, the first domain in sorted order)")
    r.add_argument("--split-file", default=None, metavar="FILE",
                   help="a fixed train/test split instead of random draws: a text/CSV file "
                        "with a header row,split | id,split | split and one line per row or "
                        "identity (train or test); every protocol then runs once on it")
    r.add_argument("--train-index", default=None, metavar="FILE",
                   help="a fixed split given as the 0-based indices of the training rows "
                        "(the rest is tested)")


def _benchmark_output_options(o) -> None:
    o.add_argument("--out", default=None,
                   help="output folder, created when there are results (default "
                        "./crossmetric-results)")
    _quiet_options(o, "hide the progress bar")
    o.add_argument("--json", action="store_true", default=None,
                   help="print the results as JSON (results.json's content) instead of the "
                        "table")
    o.add_argument("--plot-top", type=int, default=None, metavar="K",
                   help="draw only the best K methods in roc.png (by AUC) and cmc.png (by "
                        "rank-1); the tables keep every method")
    o.add_argument("--resume", action="store_true",
                   help="continue a run into --out that was stopped (Ctrl-C, a kill, a "
                        "crash): the (method, split) records it finished are kept and not run "
                        "again; the data, the methods' parameters, the seed and the protocol "
                        "must be the same")
    o.add_argument("--list", action="store_true",
                   help="list the methods (single- or cross-modal) and their settings")


def _benchmark_tune_options(r) -> None:
    r.add_argument("--tune", nargs="?", const="small", choices=("small", "paper"), default=None,
                   help="choose each method's hyper-parameters by inner cross-validation on "
                        "every split's training objects (folds grouped by identity): from its "
                        "small registry grid (--tune), or from the selection its paper "
                        "describes (--tune paper, searched stage by stage; recommended on real "
                        "data); costs (grid size x tune folds + 1) fits per split, so it is "
                        "off by default")
    r.add_argument("--tune-scoring", choices=("auc", "rank1", "map", "cmc20"), default=None,
                   help="validation measure of --tune: pair AUC (default), or rank-1 / mAP / "
                        "CMC averaged over ranks 1-20 of the validation identities "
                        "(identification)")
    r.add_argument("--tune-folds", type=int, default=None,
                   help="inner cross-validation folds of --tune (default 3)")


def _image_source_options(g, command: str) -> None:
    """``--images --pattern --descriptor --descriptor-param --size`` of ``fit``, ``evaluate``
    and ``search`` (read and described as ``benchmark`` does)."""
    g.add_argument("--images", default=None, metavar="DIR",
                   help="folder of images instead of feature files (read as 'benchmark "
                        "--images' reads it)")
    g.add_argument("--pattern", default=None, metavar="REGEX",
                   help="regular expression on each image's path relative to --images, with "
                        "a named group 'id' and optionally 'domain' (two values = the two "
                        "sides, e.g. photo and sketch)")
    model = ("" if command == "fit" else
             " (default: the model's; a model fitted on images takes only what it was "
             "fitted with)")
    g.add_argument("--descriptor", choices=_DESCRIPTORS, default=None, metavar="NAME",
                   help="image features, as in 'benchmark --descriptor' (default hog)" + model)
    g.add_argument("--descriptor-param", dest="descriptor_param", action="append",
                   default=None, metavar="NAME=VALUE",
                   help="a parameter of the descriptor's class (repeatable; VALUE is a TOML "
                        "literal)" + model)
    g.add_argument("--size", default=None, metavar="WxH",
                   help="resize images to WIDTHxHEIGHT pixels" + model)


def _probe_domain_option(g, probes: str) -> None:
    g.add_argument("--probe-domain", default=None, metavar="NAME",
                   help=f"the model's side that {probes} belong to (a domain of fit's "
                        "--pattern, or its --x-name / --y-name; default the first): naming "
                        "the second evaluates the model the other way round")


def _add_fit(sub) -> None:
    f = sub.add_parser("fit", help="fit a method on labelled pairs and save the model",
                       formatter_class=_RAW, epilog=_methods_epilog(),
                       description="Fit METHOD on your data and save it. Training "
                                   "pairs come from --pairs (rows i,j,label) or are drawn "
                                   "from --labels, or from the identities of an image folder "
                                   "(--images DIR --pattern REGEX). The model file holds the "
                                   "whole pipeline: descriptor settings, the view step (PCA "
                                   "fitted on the training side) and the learner, with the "
                                   "sides' names and feature statistics. A share of the "
                                   "training identities is held out to check the fit "
                                   "(--no-validation: none).")
    f.add_argument("method", help="method name (listed below)")
    f.add_argument("--x", default=None,
                   help="first-modality samples (.npy/.npz/.csv/whitespace text)")
    f.add_argument("--y", default=None, help="second-modality samples (cross-modal)")
    f.add_argument("--key", default=None, help="array name inside .npz feature files")
    f.add_argument("--pairs", default=None, help=".csv with rows i,j,label (+1/-1)")
    f.add_argument("--labels", default=None,
                   help="instead of --pairs: identity or category of each row (pairs drawn "
                        "as in the papers: positives within a label, at most --max-positives, "
                        "--n-negatives negatives each)")
    f.add_argument("--n-negatives", type=int, default=1,
                   help="negatives per positive with --labels (default 1)")
    f.add_argument("--max-positives", default=None, metavar="N|all",
                   help="with --labels: at most N positive pairs, drawn at random from --seed "
                        "(default 10000; class labels make quadratically many), or 'all'")
    f.add_argument("--on-conflict", choices=("error", "drop", "keep"), default="error",
                   help="--pairs rows that join the same two samples with opposite labels: "
                        "refuse them (error, default), leave them all out (drop) or fit "
                        "them as given (keep)")
    f.add_argument("--out", required=True, help="model file to write (crossmetric's "
                   "safe .npz format: loading it runs no code)")
    f.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="override a constructor argument (repeatable)")
    f.add_argument("--seed", type=int, default=None, help="random_state of the learner")
    f.add_argument("--convergence", default=None, metavar="PNG",
                   help="also plot the objective per iteration (loss_curve_) to this file")
    f.add_argument("--x-name", default=None, metavar="NAME",
                   help="name of the --x side (default x; --images: the first domain)")
    f.add_argument("--y-name", default=None, metavar="NAME",
                   help="name of the --y side (default y; --images: the second domain)")
    f.add_argument("--pca", default="auto", metavar="auto|none|N",
                   help="the view step before the learner, as in benchmark: auto (default) "
                        "reduces views wider than the training identities minus one by a PCA "
                        "fitted on the training side (learners that reduce to their span "
                        "themselves keep them), none, or a width")
    f.add_argument("--no-validation", action="store_true",
                   help="fit on every training identity, without the held-out check")
    f.add_argument("--validation-fraction", type=float, default=0.1, metavar="F",
                   help="share of the training samples (whole identities) held out to check "
                        "the fit (default 0.1); the model is fitted on the others")
    _quiet_options(f, "hide the progress bar of the image descriptors")
    _image_source_options(f.add_argument_group("images"), "fit")
    f.set_defaults(func=cmd_fit)


def _add_evaluate(sub) -> None:
    e = sub.add_parser("evaluate", help="verification / identification measures of a model",
                       description="Verification (--pairs: AUC, EER, VR, pAUC) and/or "
                                   "identification (--probe-labels/--gallery-labels: CMC, "
                                   "rank-r, mAP; --x = probes, --y = gallery, or an image "
                                   "folder: --images DIR --pattern REGEX) of a saved "
                                   "model.")
    e.add_argument("model", help="model file written by 'crossmetric fit'")
    e.add_argument("--trust-pickle", action="store_true",
                   help="also read a pickle/joblib model of an older crossmetric (UNSAFE: "
                        "it runs the file's code; only for files you trust)")
    e.add_argument("--x", default=None, help="first-modality samples (probes)")
    e.add_argument("--y", default=None, help="second-modality samples (gallery)")
    e.add_argument("--key", default=None, help="array name inside .npz feature files")
    e.add_argument("--pairs", default=None, help="verification pairs: .csv rows i,j,label")
    e.add_argument("--probe-labels", default=None,
                   help="identity of each --x row (identification)")
    e.add_argument("--gallery-labels", default=None,
                   help="identity of each --y row (identification)")
    e.add_argument("--probe-cams", default=None, metavar="FILE",
                   help="camera of each --x row (text or .npy, as --probe-labels, or the "
                        "'cams' array of an .npz from 'crossmetric features'); with "
                        "--gallery-cams, gallery items of the probe's identity and camera are "
                        "left out of its ranking (Market-1501 / torchreid)")
    e.add_argument("--gallery-cams", default=None, metavar="FILE",
                   help="camera of each --y row (with --probe-cams)")
    e.add_argument("--ranks", default="1,5,10,20",
                   help="ranks r reported as rank-r rates (default 1,5,10,20)")
    e.add_argument("--protocol", choices=("identification", "retrieval"),
                   default="identification",
                   help="with the labels: identification (default; ranks, mAP of --x probes "
                        "against the --y gallery) or retrieval (class-level cross-modal "
                        "retrieval: labels are categories, mAP x->y and y->x over the whole "
                        "sets, mAP@k, precision-recall)")
    e.add_argument("--map-k", type=int, default=50, metavar="K",
                   help="--protocol retrieval: list length of mAP@K (default 50)")
    e.add_argument("--fpr", type=float, default=1e-3, help="VR operating point (default 1e-3)")
    e.add_argument("--scores", default=None, metavar="FILE",
                   help="write per-pair scores: .csv (i,j,label,distance,score for --pairs; "
                        "probe,gallery,same,distance for identification) or .npy "
                        "(identification distance matrix)")
    e.add_argument("--json", action="store_true", help="print JSON")
    e.add_argument("--same-set", action="store_true",
                   help="the gallery is the probe set (--y absent or the same rows): each "
                        "probe's own item is left out of its ranking")
    e.add_argument("--re-rank", action="store_true",
                   help="k-reciprocal re-ranking of the distances (Zhong et al. 2017; k1=20, "
                        "k2=6, lambda=0.3)")
    e.add_argument("--query-expansion", type=int, default=None, metavar="K",
                   help="average query expansion with the K nearest gallery items")
    e.add_argument("--show-ranks", type=int, default=None, metavar="N",
                   help="write the rank lists of the first N probes: HTML page (--ranks-out) "
                        "and a PNG beside it")
    e.add_argument("--ranks-failures", action="store_true",
                   help="with --show-ranks N: the first N probes whose first match is wrong "
                        "instead of the first N probes")
    e.add_argument("--top-k", type=int, default=10,
                   help="gallery items per rank list (default 10)")
    e.add_argument("--ranks-out", default="crossmetric-ranks.html", metavar="FILE.html",
                   help="rank-list page (default crossmetric-ranks.html)")
    e.add_argument("--probe-images", default=None, metavar="FILE.npy",
                   help="pictures of the probes for --show-ranks ((n, h, w[, 3]) array) when "
                        "the model takes features")
    e.add_argument("--gallery-images", default=None, metavar="FILE.npy",
                   help="pictures of the gallery for --show-ranks")
    _probe_domain_option(e, "--x (or the --images of that domain)")
    _quiet_options(e, "hide the progress bar of the image descriptors")
    _image_source_options(e.add_argument_group(
        "images (identification of the folder's identities: the probe domain against the "
        "other)"), "evaluate")
    e.set_defaults(func=cmd_evaluate)


def _add_search(sub) -> None:
    s = sub.add_parser("search", help="k nearest database rows of each query",
                       description="The k nearest database rows of each query in the learned "
                                   "metric (faiss when installed, else exhaustive).")
    s.add_argument("model", help="model file written by 'crossmetric fit'")
    s.add_argument("--trust-pickle", action="store_true",
                   help="also read a pickle/joblib model of an older crossmetric (UNSAFE: "
                        "it runs the file's code; only for files you trust)")
    s.add_argument("--database", default=None, help="database rows (second modality)")
    s.add_argument("--queries", default=None, help="queries (first modality)")
    s.add_argument("--key", default=None, help="array name inside .npz feature files")
    s.add_argument("-k", type=int, default=10,
                   help="neighbours per query (default 10; at most the database size)")
    s.add_argument("--kind", choices=("flat", "ivf", "ivfpq", "gmm"), default="flat",
                   help="faiss index: flat (exact, default), ivf, ivfpq, gmm")
    s.add_argument("--out", default=None, help="write .csv or .npz instead of stdout")
    s.add_argument("--json", action="store_true",
                   help="print the results as JSON (one object per query) instead of CSV")
    _probe_domain_option(s, "--queries (or the --images of that domain)")
    _quiet_options(s, "hide the progress bar of the image descriptors")
    _image_source_options(s.add_argument_group(
        "images (the probe domain's images are the queries, the other domain's the "
        "database; one domain: both)"), "search")
    s.set_defaults(func=cmd_search)


def _add_reproduce(sub) -> None:
    r = sub.add_parser("reproduce", help="re-run a paper's experiment on its data and print "
                                         "the published numbers beside ours",
                       description="Named reproductions (see --list): our numbers, the "
                                   "paper's and the difference; writes results.csv, "
                                   "results.json and the figure into --out.")
    r.add_argument("name", nargs="?", help="reproduction name (see --list)")
    r.add_argument("--list", action="store_true", help="list the reproductions")
    r.add_argument("--data-home", default=None,
                   help="folder holding viper/ and pku_sketch/ (default: ../shared/data "
                        "relative to the current directory, if present)")
    r.add_argument("--splits", type=int, default=None,
                   help="random splits (default: the paper's, 10)")
    r.add_argument("--seed", type=int, default=0, help="random seed of the splits (default 0)")
    r.add_argument("--out", default=None,
                   help="output folder (default ./crossmetric-reproduce/NAME)")
    r.add_argument("--n-jobs", type=int, default=-1,
                   help="parallel workers over the splits (default: all cores)")
    _quiet_options(r, "no progress lines")
    r.add_argument("--json", action="store_true",
                   help="print the results as JSON (rows of ours / paper / diff) instead of "
                        "the table")
    r.add_argument("--methods", default=None,
                   help="comma list of the methods to run, default all (the reproductions "
                        "that take a choice, and their methods: see --list)")
    r.add_argument("--setting", default=None, choices=("paper", "legacy"),
                   help="pku-sketch: 'paper' (default) selects every method's paper grid on "
                        "the training persons; 'legacy' the first reproduction "
                        "(HOG, registry defaults)")
    r.add_argument("--descriptor", default=None,
                   help="pku-sketch: hog, dense-sift, lbp, ltp, patch-color-sift or hog+ltp "
                        "(default: the setting's)")
    r.add_argument("--deepgsm-members", type=int, default=None,
                   help="pku-sketch: DeepGSM seeds averaged (default 2; 1: the single model "
                        "only, half the time)")
    r.add_argument("--device", default=None,
                   help="gsm-cufs, gsm-cuhk01-deep: where DeepGSM trains (cuda, cpu; default "
                        "auto for gsm-cufs, cpu for gsm-cuhk01-deep)")
    r.add_argument("--epochs", type=int, default=None,
                   help="gsm-cufs: DeepGSM's passes over the training persons (default 500)")
    r.add_argument("--feature-cache", default=None, metavar="PATH",
                   help="gsm-cuhk01(-deep): .npz file caching the CUHK01 descriptors "
                        "(read when it exists, else written)")
    r.add_argument("--show-ranks", type=int, default=None, metavar="N",
                   help="pku-sketch: write the first split's rank lists of N sketches "
                        "(ranks.html, ranks_<method>.png in --out)")
    r.add_argument("--no-guarded", dest="guarded", action="store_const", const=False,
                   default=None,
                   help="pcca-viper, pku-sketch, cml-auc-cufs, gsm-cuhk01: the paper's runs "
                        "only, without the guarded run beside each (the library's start and "
                        "held-out guard; shorter)")
    r.set_defaults(func=cmd_reproduce)


def _add_features(sub) -> None:
    t = sub.add_parser("features", help="embed a folder of images with a backbone (weights "
                                        "from a file) for the shallow learners",
                       description="Pooled features of a torchvision (or timm) architecture, "
                                   "randomly initialised or loaded from a local state-dict "
                                   "file (never downloaded), written to an .npz file whose "
                                   "array X the other commands read (--x emb.npz), with ids, "
                                   "domains and filenames (crossmetric.deep.backbones).")
    t.add_argument("--backbone", required=True, metavar="NAME",
                   help="architecture name, e.g. resnet18, efficientnet_b0, vit_b_16")
    t.add_argument("--weights", default=None, metavar="FILE",
                   help="state dict of that architecture (torch.save(model.state_dict(), "
                        "FILE)); default: random initialisation from --seed")
    t.add_argument("--images", required=True, metavar="DIR", help="folder of images")
    t.add_argument("--pattern", default=None, metavar="REGEX",
                   help="regular expression on each image's path relative to --images, with "
                        "a named group 'id' and optionally 'domain' (default: every image "
                        "file, id = its path without the extension)")
    t.add_argument("--size", default=None, metavar="WxH",
                   help="resize images to WIDTHxHEIGHT pixels (needed when sizes differ)")
    t.add_argument("--normalize", choices=("imagenet", "none"), default="none",
                   help="standardise inputs with ImageNet's channel statistics, as "
                        "ImageNet-trained weights expect (default none)")
    t.add_argument("--batch-size", type=int, default=64, help="images per forward pass")
    t.add_argument("--device", default="cpu", help="torch device (default cpu)")
    t.add_argument("--seed", type=int, default=0, help="seed of a random initialisation")
    t.add_argument("--out", required=True, metavar="FILE.npz", help="embeddings file to write")
    t.set_defaults(func=cmd_features)
