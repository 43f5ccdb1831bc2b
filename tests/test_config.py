"""Run configuration: TOML file + --param + defaults → resolved settings, written and read back."""

import json
import math
import tomllib

import numpy as np
import pytest

from crossmetric.cli import build_parser, main
from crossmetric.config import (
    BENCHMARK_OPTIONS,
    RunConfig,
    load_config,
    parse_param,
    resolve_config,
    to_toml,
)
from crossmetric.datasets import make_cross_modal

RUN = """
[benchmark]
methods = ["euclidean", "gsm"]
folds = 4
repeats = 2
max-train-positives = 300
quiet = true

[methods.gsm]
mu = 1e-3
n_components = 6
structure = "ladf"

[methods.cmlauc]
fpr_range = [0.0, 0.2]
"""


def _err(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_round_trip_gives_the_same_run_settings(tmp_path):
    (tmp_path / "run.toml").write_text(RUN)
    cfg = resolve_config({"seed": 7}, tmp_path / "run.toml", params=["pcca.n_components=5"])
    assert cfg.options["folds"] == 4 and cfg.options["max_train_positives"] == 300
    assert cfg.options["methods"] == "euclidean,gsm" and cfg.options["seed"] == 7
    assert cfg.options["n_negatives"] == BENCHMARK_OPTIONS["n_negatives"].default
    names = ["euclidean", "gsm", "pcca", "cmlauc"]
    cfg.write(tmp_path / "config.toml", methods=names)
    # the written file is TOML and holds each method's full parameters (every constructor
    # parameter, not only those the registry or the file set); the None ones in a comment
    text = (tmp_path / "config.toml").read_text()
    written = tomllib.loads(text)
    for name in names:
        full = cfg.make_estimator(name).get_params(deep=False)
        full = {k: list(v) if isinstance(v, tuple) else v for k, v in full.items()
                if v is not None and k != "preprocessor"}
        assert written["methods"][name] == full, name
    assert len(written["methods"]["gsm"]) > 10
    assert {"n_components": 6, "max_iter": 1000, "mu": 1e-3, "structure": "ladf"}.items() \
        <= written["methods"]["gsm"].items()
    assert written["methods"]["cmlauc"]["fpr_range"] == [0.0, 0.2]
    assert "# None (TOML has no null; left out): " in text and "random_state" in text
    again = resolve_config({}, tmp_path / "config.toml")
    assert again.options == cfg.options
    for name in names:
        assert again.estimator_params(name) == cfg.estimator_params(name)
        a = again.make_estimator(name).get_params(deep=False)
        b = cfg.make_estimator(name).get_params(deep=False)
        assert a == b, name
    assert cfg.make_estimator("cmlauc").fpr_range == (0.0, 0.2)
    assert cfg.make_estimator("gsm").structure == "ladf"
    # no temporary file is left beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml", "run.toml"]


def test_a_none_set_by_param_survives_config_toml(tmp_path):
    """`--param cmlauc.reduce_to=None` (the registry sets 32): config.toml writes it so that
    --config gives None again, not the registry's 32."""
    cfg = resolve_config({}, None, params=["cmlauc.reduce_to=None", "gsm.mu=1e-3"])
    assert cfg.make_estimator("cmlauc").reduce_to is None
    cfg.write(tmp_path / "config.toml", methods=["cmlauc", "gsm"])
    text = (tmp_path / "config.toml").read_text()
    assert 'reduce_to = "None"' in text
    again = resolve_config({}, tmp_path / "config.toml")
    for name in ("cmlauc", "gsm"):
        assert again.make_estimator(name).get_params() == cfg.make_estimator(name).get_params()


def test_precedence_defaults_file_options_params(tmp_path):
    pytest.importorskip("torch", reason="deepgsm.* is checked on DeepGSM: needs torch ([deep])")
    (tmp_path / "run.toml").write_text(RUN)
    cfg = resolve_config({"folds": 3, "repeats": None}, tmp_path / "run.toml",
                         params=["gsm.mu=1e-2", "gsm.learn_f=true", "deepgsm.device=cpu"])
    assert cfg.options["folds"] == 3        # option given beats the file
    assert cfg.options["repeats"] == 2      # None = not given: the file's value
    assert cfg.options["n_jobs"] == -1      # the default
    assert cfg.method_params["gsm"] == {"mu": 1e-2, "n_components": 6, "structure": "ladf",
                                        "learn_f": True}
    assert cfg.method_params["deepgsm"] == {"device": "cpu"}
    # the last --param wins
    assert resolve_config(params=["gsm.mu=1", "gsm.mu=2"]).method_params == {"gsm": {"mu": 2}}


def test_parse_param_values_are_toml_literals():
    assert parse_param("gsm.mu=1e-3") == ("gsm", "mu", 1e-3)
    assert parse_param("GSM.n_components = 4") == ("gsm", "n_components", 4)
    assert parse_param("gsm.structure='ladf'") == ("gsm", "structure", "ladf")
    assert parse_param("gsm.structure=ladf") == ("gsm", "structure", "ladf")
    assert parse_param("cmlauc.fpr_range=[0, 0.1]") == ("cmlauc", "fpr_range", (0, 0.1))
    assert parse_param("gsm.learn_f=false") == ("gsm", "learn_f", False)


@pytest.mark.parametrize("item, message", [
    ("gsm", "--param expects METHOD.NAME=VALUE (e.g. gsm.mu=1e-3), got 'gsm'."),
    ("mu=1", "--param expects METHOD.NAME=VALUE (e.g. gsm.mu=1e-3), got 'mu=1'."),
    ("gsmm.mu=1", "--param 'gsmm.mu=1': unknown method 'gsmm' (did you mean 'gsm'?); expected "
                  "one of "),
    ("pcca.muu=1", "--param 'pcca.muu=1': method 'pcca' (PCCA) has no parameter 'muu'"),
    ("gsm.mu=1e-3x!", "--param 'gsm.mu=1e-3x!': the value '1e-3x!' is not a TOML literal"),
])
def test_bad_params_name_the_culprit(item, message):
    with pytest.raises(ValueError) as info:
        parse_param(item)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text, message", [
    ("[benchmark]\nfold = 3\n", "unknown option 'fold' (did you mean 'folds'?); expected one "
                                "of dataset, "),
    ("folds = 3\n", "unknown table 'folds' (benchmark options go in a [benchmark] table); "
                    "expected benchmark, methods, descriptor."),
    ("[benchmark]\nfolds = \"3\"\n", "option 'folds' must be int, got '3'."),
    ("[benchmark]\nquiet = 1\n", "option 'quiet' must be bool, got 1."),
    ("[benchmark]\nprotocol = \"both ways\"\n", "option 'protocol' must be one of both, "
                                                "verification, identification, "
                                                "retrieval, got 'both ways'."),
    ("[benchmark]\nmethods = [\"gsm\", 3]\n", "option 'methods' must be str or list of str"),
    ("[methods.gsmm]\nmu = 1\n", "unknown method 'gsmm' (did you mean 'gsm'?)"),
    ("[methods.gsm]\nmuu = 1\n", "method 'gsm' (GSM) has no parameter 'muu' (did you mean "
                                 "'mu'?); expected one of "),
    ("[methods]\ngsm = 1\n", "[methods.gsm] must be a table of parameters, got 1."),
    ("[benchmark\n", "not valid TOML"),
    ("[benchmark]\ndescriptor_params = {threshold = 3}\n",
     "option 'descriptor_params' goes in a [descriptor] table of NAME = VALUE entries."),
    ("[benchmark]\ndescriptor = \"sift\"\n", "option 'descriptor' must be one of hog, "
                                              "dense-sift, lbp, ltp, lomo, strips, "),
])
def test_bad_config_files_name_the_culprit(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        load_config(path)
    assert str(info.value).startswith(f"config {str(path)!r}: ")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_json_config_and_missing_file(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"benchmark": {"folds": 5},
                                                 "methods": {"pcca": {"n_components": 3}}}))
    cfg = resolve_config(config=tmp_path / "c.json")
    assert cfg.options["folds"] == 5 and cfg.method_params == {"pcca": {"n_components": 3}}
    with pytest.raises(ValueError, match="cannot read it"):
        load_config(tmp_path / "none.toml")


def test_to_toml_reads_back():
    data = {"benchmark": {"a": "x \"q\" \\ é\t", "b": [1, 2.5, True], "n": None,
                          "f": float("inf"), "g": 1e-300},
            "methods": {"m": {"r": (0.0, 0.1), "t": {"k": 1}}, "empty": {}}}
    back = tomllib.loads(to_toml(data))
    assert back["benchmark"] == {"a": "x \"q\" \\ é\t", "b": [1, 2.5, True],
                                 "f": math.inf, "g": 1e-300}
    assert back["methods"] == {"m": {"r": [0.0, 0.1], "t": {"k": 1}}, "empty": {}}
    with pytest.raises(ValueError, match="cannot be written as TOML"):
        to_toml({"t": {"x": object()}})


def test_cli_and_python_defaults():
    """The defaults shared with run_protocols are read from its signature; the two that differ
    (n_jobs, progress) are documented in crossmetric.config."""
    import inspect

    from crossmetric.protocols import run_protocols

    sig = inspect.signature(run_protocols).parameters
    d = RunConfig(resolve_config().options).options
    assert (d["folds"], d["repeats"], d["n_negatives"], d["max_train_positives"], d["seed"]) \
        == tuple(sig[k].default for k in ("n_folds", "n_repeats", "n_negatives",
                                           "max_train_positives", "random_state"))
    assert (d["n_jobs"], sig["n_jobs"].default) == (-1, None)
    assert (d["quiet"], sig["progress"].default) == (False, False)
    import crossmetric.config as C

    assert "n_jobs = -1" in C.__doc__ and "progress=False" in C.__doc__


def test_quiet_is_one_spelling_with_hidden_alias():
    p = build_parser()
    for cmd in (["benchmark"], ["reproduce", "pku-sketch"]):
        assert p.parse_args(cmd + ["--quiet"]).quiet is True
        assert p.parse_args(cmd + ["-q"]).quiet is True
        assert p.parse_args(cmd + ["--no-progress"]).quiet is True
        assert not p.parse_args(cmd).quiet
    sub = next(a for a in p._actions if a.dest == "command").choices
    for name in ("benchmark", "reproduce"):
        text = sub[name].format_help()
        assert "--quiet" in text and "--no-progress" not in text


@pytest.fixture
def small_data(tmp_path):
    d = make_cross_modal(90, n_classes=9, n_features_x=6, n_features_y=5, random_state=3)
    for name, arr in (("x", d.X), ("y", d.Y), ("l", d.labels)):
        np.save(tmp_path / f"{name}.npy", arr)
    return tmp_path


def test_cli_config_param_json_and_rerun(small_data, capsys):
    t = small_data
    (t / "run.toml").write_text(
        f'[benchmark]\nx = "{t / "x.npy"}"\ny = "{t / "y.npy"}"\nlabels = "{t / "l.npy"}"\n'
        'methods = "euclidean,pcca"\nfolds = 2\nrepeats = 1\nn_jobs = 1\nquiet = true\n'
        '[methods.pcca]\nn_components = 2\nmax_iter = 20\n')
    assert main(["benchmark", "--config", str(t / "run.toml"), "--param", "pcca.n_components=3",
                 "--out", str(t / "a"), "--json"]) == 0
    out = capsys.readouterr().out
    printed = json.loads(out)                      # stdout is the JSON alone
    assert printed["methods"] == ["Euclidean-C", "PCCA-C"]  # 6 vs 5 features: CCA views
    assert printed["summary"] == json.loads((t / "a" / "results.json").read_text())["summary"]
    written = load_config(t / "a" / "config.toml")
    assert {"n_components": 3, "max_iter": 20}.items() <= written["methods"]["pcca"].items()
    assert "learning_rate" in written["methods"]["pcca"]       # every parameter, not the set
    assert written["benchmark"]["folds"] == 2 and written["benchmark"]["out"] == str(t / "a")
    # the written configuration repeats the run
    assert main(["benchmark", "--config", str(t / "a" / "config.toml"), "--out",
                 str(t / "b")]) == 0
    capsys.readouterr()
    first = json.loads((t / "a" / "results.json").read_text())["summary"]
    second = json.loads((t / "b" / "results.json").read_text())["summary"]
    def measures(rows):
        return [(r["method"], r["measure"], r["mean"]) for r in rows
                if "seconds" not in r["measure"]]

    assert len(measures(first)) > 10 and measures(first) == measures(second)


def test_cli_bad_param_and_config_are_one_line(small_data, capsys):
    assert main(["benchmark", "--param", "pcca.nope=1"]) == 2
    assert _err(capsys).startswith("crossmetric: error: --param 'pcca.nope=1': method 'pcca' "
                                   "(PCCA) has no parameter 'nope'")
    (small_data / "bad.toml").write_text("[benchmark]\nfolds = 1\n")
    assert main(["benchmark", "--config", str(small_data / "bad.toml")]) == 2
    assert _err(capsys) == "crossmetric: error: --folds must be >= 2, got 1."


def test_reproduce_json(monkeypatch, tmp_path, capsys):
    from crossmetric import reproduce as R

    def fake(name, data_home, **kw):
        res = R.ReproductionResult(name=name, source="test")
        res.add("p=316", "PCCA", "rank1", [10.0, 20.0], paper=19.0)
        res.add("p=316", "PCCA", "rank5", [], paper=None)
        res.files = ["results.csv"]
        return res

    monkeypatch.setattr(R, "run_reproduction", fake)
    assert main(["reproduce", "pcca-viper", "--json", "--out", str(tmp_path)]) == 0
    got = capsys.readouterr()
    data = json.loads(got.out)
    assert data["name"] == "pcca-viper"
    assert data["rows"][0]["ours"] == 15.0 and data["rows"][0]["diff"] == -4.0
    assert data["rows"][1]["ours"] is None          # NaN is written as null
    assert "wrote results.csv" in got.err
