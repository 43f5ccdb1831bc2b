"""The crossmetric.cli package keeps every name of the former one-module cli.py; the commands
reach the library through it (monkeypatching works); the registry's 'did you mean'."""

import subprocess
import sys

import pytest

import crossmetric.cli as cli

#: the top-level names of crossmetric/cli.py before it became a package
OLD_NAMES = [
    "CLIError", "_Parser", "_one_line", "_load_array", "_load_label_file", "_check_int",
    "_check_output_file", "_check_output_dir", "_load_pairs", "_check_pair_rows",
    "_preprocessor", "_save_model", "_load_model", "_parse_params", "_DESCRIPTORS",
    "_parse_size", "_describe_images", "_images_to_dataset", "_load_named_dataset",
    "_own_dataset", "_method_list", "_method_kind", "_print_method_list", "_cap_components",
    "_validate_benchmark", "_resolve_benchmark_config", "cmd_benchmark", "_BENCHMARK_FILES",
    "_write_benchmark_files", "_fit_pairs", "cmd_fit", "_parse_ranks", "_validate_evaluate",
    "_identification", "_load_pictures", "_show_ranks", "cmd_evaluate", "_exhaustive_search",
    "cmd_search", "_write_search_csv", "_quiet_options", "_methods_epilog", "build_parser",
    "_ANY_IMAGE", "cmd_features", "cmd_reproduce", "_Terminated", "_sigterm_unwinds", "main",
]


@pytest.mark.parametrize("name", OLD_NAMES)
def test_every_former_name_is_still_there(name):
    assert hasattr(cli, name)


def test_public_names_and_the_files_a_run_writes():
    assert cli.__all__ == ["main", "build_parser", "CLIError"]
    assert cli._BENCHMARK_FILES == ("results.csv", "results.json", "results.md",
                                    "results.tex", "roc.png", "cmc.png", "config.toml")
    assert cli._DESCRIPTORS == ("hog", "dense-sift", "lbp", "ltp", "lomo", "strips",
                                "patch-color-sift", "pixels")


def test_commands_use_the_package_attribute(monkeypatch, tmp_path):
    from crossmetric.retrieval import exhaustive_search

    calls = []

    def fake(model, Q, D, k):
        calls.append(k)
        return exhaustive_search(model, Q, D, k)

    monkeypatch.setattr(cli, "_exhaustive_search", fake)
    monkeypatch.setitem(sys.modules, "faiss", None)   # no faiss: the exhaustive path
    import numpy as np

    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.normal(size=(20, 3)))
    (tmp_path / "l.txt").write_text("\n".join(str(i % 4) for i in range(20)))
    model = tmp_path / "m.model"
    assert cli.main(["fit", "euclidean", "--x", str(tmp_path / "x.npy"), "--labels",
                     str(tmp_path / "l.txt"), "--out", str(model)]) == 0
    assert cli.main(["search", str(model), "--database", str(tmp_path / "x.npy"),
                     "--queries", str(tmp_path / "x.npy"), "-k", "3",
                     "--out", str(tmp_path / "s.csv")]) == 0
    assert calls == [3]
    assert (tmp_path / "s.csv").read_text().splitlines()[1].startswith("0,1,0,")


def test_benchmark_methods_did_you_mean(capsys):
    assert cli.main(["benchmark", "--methods", "euclidean,pcaa"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("crossmetric: error: unknown method(s) pcaa (did you mean 'pcca'?)")
    assert cli.main(["benchmark", "--methods", " , "]) == 2
    assert capsys.readouterr().err.strip() == "crossmetric: error: --methods is empty."


def test_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "crossmetric", "--version"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("crossmetric ")


def test_reproduction_options_reach_their_reproduction_only(monkeypatch, capsys):
    """Every reproduction-specific option (cli/reproduce._OPTIONS) is refused by the other
    reproductions and reaches its own under the reproduction's keyword."""
    from crossmetric.cli import main
    from crossmetric.cli import reproduce as cli_reproduce

    values = {"deepgsm_members": "2", "show_ranks": "3", "device": "cpu", "epochs": "4",
              "feature_cache": "f.npz", "setting": "legacy", "descriptor": "hog"}
    assert set(values) == set(cli_reproduce._OPTIONS)
    seen = {}

    class _Result:
        seconds, files, table = 0.0, [], staticmethod(lambda: "")

    def fake_run(name, data_home, **kw):
        seen.update(kw, name=name)
        return _Result()

    monkeypatch.setattr("crossmetric.reproduce.run_reproduction", fake_run)
    for opt, (names, _what, keyword) in cli_reproduce._OPTIONS.items():
        flag = "--" + opt.replace("_", "-")
        assert main(["reproduce", "pcca-viper", flag, values[opt]]) == 2
        assert flag in capsys.readouterr().err
        seen.clear()
        assert main(["reproduce", names[0], flag, values[opt], "--out", "unused"]) == 0
        capsys.readouterr()
        assert seen["name"] == names[0] and str(seen[keyword]) == values[opt]
