"""The crossmetric.cli package: its public names, the files a run writes, the registry's
'did you mean'."""

import subprocess
import sys

import crossmetric.cli as cli
from crossmetric.cli.benchmark import _BENCHMARK_FILES
from crossmetric.features._image_views import DESCRIPTORS


def test_public_names_and_the_files_a_run_writes():
    assert cli.__all__ == ["main", "build_parser", "CLIError"]
    assert _BENCHMARK_FILES == ("results.csv", "results.json", "results.md",
                            "results.tex", "roc.png", "cmc.png", "config.toml")
    assert DESCRIPTORS == ("hog", "dense-sift", "lbp", "ltp", "lomo", "strips",
                           "patch-color-sift", "pixels")


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
    """Every reproduction-specific option (``Reproduction.options``) is refused by the other
    reproductions and reaches its own under the reproduction's keyword."""
    from crossmetric.cli import main
    from crossmetric.reproduce import REPRODUCTIONS

    values = {"deepgsm_members": "2", "show_ranks": "3", "device": "cpu", "epochs": "4",
              "feature_cache": "f.npz", "setting": "legacy", "descriptor": "hog",
              "guarded": "False"}
    flags = {"guarded": ["--no-guarded"]}   # a switch: no value
    owners = {}
    for name, rep in REPRODUCTIONS.items():
        for opt, keyword in rep.options.items():
            owners.setdefault(opt, []).append((name, keyword))
    assert set(values) == set(owners)
    seen = {}

    class _Result:
        seconds, files, table = 0.0, [], staticmethod(lambda: "")

    def fake_run(name, data_home, **kw):
        seen.update(kw, name=name)
        return _Result()

    monkeypatch.setattr("crossmetric.reproduce.run_reproduction", fake_run)
    for opt, takers in owners.items():
        given = flags.get(opt, ["--" + opt.replace("_", "-"), values[opt]])
        other = next(n for n in REPRODUCTIONS if n not in dict(takers))
        assert main(["reproduce", other, *given]) == 2
        assert given[0] in capsys.readouterr().err
        for name, keyword in takers:
            seen.clear()
            assert main(["reproduce", name, *given, "--out", "unused"]) == 0
            capsys.readouterr()
            assert seen["name"] == name and str(seen[keyword]) == values[opt]
