"""A stopped ``crossmetric benchmark`` keeps every finished (method, split) record and
``--resume`` continues it: the same result files as a run that was never stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from crossmetric.cli import main
from crossmetric.cli._run_records import RunRecords

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def data(tmp_path):
    """Eight identities x 5 rows: X.npy and Y.npy (5 features each), labels.txt."""
    rng = np.random.RandomState(0)
    lab = np.repeat(np.arange(8), 5)
    np.save(tmp_path / "X.npy", rng.normal(size=(40, 5)) + lab[:, None])
    np.save(tmp_path / "Y.npy", rng.normal(size=(40, 5)) + lab[:, None])
    (tmp_path / "labels.txt").write_text("\n".join(map(str, lab)) + "\n")
    return tmp_path


def _args(t, out, *extra, methods="euclidean,cca,pcca"):
    return ["benchmark", "--x", str(t / "X.npy"), "--y", str(t / "Y.npy"), "--labels",
            str(t / "labels.txt"), "--methods", methods, "--folds", "3", "--repeats", "2",
            "--quiet", "--n-jobs", "1", "--out", str(out), *extra]


def _numbers(folder) -> dict:
    """results.json and results.csv without the timings (which differ from run to run)."""
    res = json.loads((folder / "results.json").read_text())
    res["records"] = [r for r in res["records"] if r["measure"] != "fit_seconds"]
    res["summary"] = [r for r in res["summary"] if r["measure"] != "fit_seconds"]
    res["info"].pop("seconds")
    for runs in res["info"].get("tuned", {}).values():
        for r in runs:
            r.pop("seconds")
    csv = [line for line in (folder / "results.csv").read_text().splitlines()
           if "fit_seconds" not in line]
    return {"json": res, "csv": csv, "files": sorted(os.listdir(folder))}


def _stop_after(monkeypatch, n: int, exc=KeyboardInterrupt):
    """The run stops (Ctrl-C by default) just after its ``n``-th record is written."""
    written = []
    add = RunRecords.add

    def stopping(self, out):
        add(self, out)
        written.append(out)
        if len(written) == n:
            raise exc()

    monkeypatch.setattr(RunRecords, "add", stopping)
    return written


def _records(t, name="res"):
    folder = t / f".{name}.staging-resume"
    return sorted(p for p in os.listdir(folder) if p != "run.json") if folder.exists() else []


def test_a_stopped_run_keeps_its_records_and_resume_equals_an_uninterrupted_run(
        data, monkeypatch, capsys):
    t = data
    assert main(_args(t, t / "whole")) == 0
    assert not (t / ".whole.staging-resume").exists()   # removed once the files are in
    capsys.readouterr()
    written = _stop_after(monkeypatch, 7)
    assert main(_args(t, t / "res")) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "crossmetric: interrupted"
    assert err[-2] == (f"crossmetric: 7 finished (method, split) records kept in "
                       f"{t / '.res.staging-resume'}; the same command with --resume "
                       "continues the run")
    assert not (t / "res").exists() and len(_records(t)) == 7
    # the units run longest first (iterative learners before closed forms): 7 distinct units
    assert len(set(_records(t))) == 7
    monkeypatch.undo()
    assert main(_args(t, t / "res", "--resume")) == 0
    err = capsys.readouterr().err
    assert "resuming: 7 finished (method, split) records kept, the rest run now" in err
    assert _numbers(t / "res") == _numbers(t / "whole")
    assert sorted(os.listdir(t)) == ["X.npy", "Y.npy", "labels.txt", "res", "whole"]
    assert len(written) == 7


def test_resume_skips_the_finished_units(data, monkeypatch, capsys):
    """The units recorded are not fitted again (only the 15 - 4 others are)."""
    from crossmetric.protocols import runner

    t = data
    _stop_after(monkeypatch, 4)
    assert main(_args(t, t / "res")) == 130
    monkeypatch.undo()
    ran = []
    run_split = runner._run_split

    def counting(name, *a, **k):
        ran.append(name)
        return run_split(name, *a, **k)

    monkeypatch.setattr(runner, "_run_split", counting)
    assert main(_args(t, t / "res", "--resume")) == 0
    # iterative learners run first (CCA has max_iter for its iterative solver, then PCCA)
    assert len(ran) == 3 * 5 - 4 and ran.count("CCA") == 1 and ran.count("Euclidean") == 5


def test_resume_refuses_other_settings_in_one_line(data, monkeypatch, capsys):
    t = data
    r = main(_args(t, t / "res", "--resume"))
    assert r == 2
    assert capsys.readouterr().err.strip() == (
        f"crossmetric: error: --resume: no stopped run of {str(t / 'res')!r} to continue (its "
        f"records would be in {str(t / '.res.staging-resume')!r}); run without --resume.")
    _stop_after(monkeypatch, 3)
    assert main(_args(t, t / "res")) == 130
    monkeypatch.undo()
    capsys.readouterr()
    np.save(t / "X2.npy", np.load(t / "X.npy") + 1e-9)
    for extra, message in (
            (["--seed", "3"], "--seed is 3, the stopped run's was 0"),
            (["--param", "pcca.n_components=2"],
             "the parameters of PCCA differ from the stopped run's (n_components=2 now, "),
            (["--folds", "4"], "--folds is 4, the stopped run's was 3"),
            (["--protocol", "verification"], "--protocol is verification, the stopped run's "
                                             "was both")):
        assert main(_args(t, t / "res", "--resume", *extra)) == 2, extra
        line = capsys.readouterr().err.strip().splitlines()[-1]   # after the start lines
        assert line.startswith("crossmetric: error: --resume: ") and message in line, line
        assert line.endswith("; run without --resume to start over.")
    argv = _args(t, t / "res", "--resume")
    argv[argv.index(str(t / "X.npy"))] = str(t / "X2.npy")
    assert main(argv) == 2
    assert "the data differ from the stopped run's (X is not the same)" in \
        capsys.readouterr().err
    assert main(_args(t, t / "res", "--resume", methods="euclidean,cca,pcca,gsm")) == 2
    assert "method GSM was not in the stopped run's methods" in capsys.readouterr().err
    assert len(_records(t)) == 3        # a refusal leaves the records as they were


def test_a_new_run_without_resume_starts_over_and_says_so(data, monkeypatch, capsys):
    t = data
    _stop_after(monkeypatch, 2)
    assert main(_args(t, t / "res")) == 130
    monkeypatch.undo()
    capsys.readouterr()
    assert main(_args(t, t / "res")) == 0
    assert (f"crossmetric: note: the 2 records of a stopped run into {t / 'res'} are "
            "discarded; this run starts over") in capsys.readouterr().err
    assert not (t / ".res.staging-resume").exists()


def test_a_failing_method_is_recorded_and_the_others_go_on(data, monkeypatch, capsys):
    """One method's crash is that method's failure: the others' results are written, the
    failure is a record too, and a resume runs the failed units again."""
    from crossmetric.learners.pcca import PCCA

    t = data

    def broken(self, *a, **k):
        raise MemoryError("out of memory in the test")

    monkeypatch.setattr(PCCA, "fit", broken)
    _stop_after(monkeypatch, 7)        # CCA's 5 units, PCCA's first 2 (longest first)
    assert main(_args(t, t / "res")) == 130
    failed = [json.loads((t / ".res.staging-resume" / n).read_text())
              for n in _records(t) if "PCCA" in n]
    assert len(failed) == 2 and all("out of memory" in json.dumps(f) for f in failed)
    monkeypatch.undo()
    monkeypatch.setattr(PCCA, "fit", broken)
    capsys.readouterr()
    assert main(_args(t, t / "res", "--resume")) == 0
    cap = capsys.readouterr()
    assert "crossmetric: PCCA failed: MemoryError: out of memory in the test" in cap.err
    assert "resuming: 5 finished" in cap.err      # the 2 failed units were run again
    res = json.loads((t / "res" / "results.json").read_text())
    assert res["methods"] == ["Euclidean", "CCA", "PCCA"] and "PCCA" in res["errors"]
    assert {r["method"] for r in res["records"]} == {"Euclidean", "CCA"}


def test_runner_reports_each_output_in_the_calling_process_with_two_jobs():
    """``on_output`` runs in the parent, with joblib workers; ``completed`` skips units and
    the result equals a run that computed them."""
    from crossmetric import CCA, Euclidean
    from crossmetric.datasets import make_cross_modal
    from crossmetric.protocols import run_protocols

    d = make_cross_modal(80, n_classes=8, n_features_x=4, n_features_y=4, random_state=0)
    ests = {"Euclidean": Euclidean(), "CCA": CCA(n_components=2)}
    seen = []
    whole = run_protocols(ests, d, n_folds=2, n_repeats=2, n_jobs=2,
                          on_output=lambda out: seen.append((os.getpid(), out)))
    assert len(seen) == 8 and {pid for pid, _ in seen} == {os.getpid()}
    done = {(o["method"], o["protocol"], o["split"]): o for _, o in seen[:5]}
    part = run_protocols(ests, d, n_folds=2, n_repeats=2, n_jobs=1, completed=done)
    for a, b in ((whole, part),):
        keep = [(r["method"], r["protocol"], r["split"], r["measure"], r["value"])
                for r in a.records if r["measure"] != "fit_seconds"]
        assert keep == [(r["method"], r["protocol"], r["split"], r["measure"], r["value"])
                        for r in b.records if r["measure"] != "fit_seconds"]
        np.testing.assert_array_equal(a.curves["CCA"]["cmc"], b.curves["CCA"]["cmc"])


def test_records_read_back_as_written(tmp_path):
    """Arrays (dtype kept), tuples, NaN and nested dicts survive the JSON record."""
    out = {"method": "A b/c", "protocol": "verification", "split": 3,
           "measures": {"auc": 0.91, "vr": float("nan")}, "roc": np.linspace(0, 1, 5),
           "cmc": np.arange(3, dtype=np.float32), "warnings": ["ConvergenceWarning"],
           "tuned": {"params": {"fpr_range": (0.0, 0.1), "mu": np.float64(1e-3)}, "split": 3}}
    rec = RunRecords.open(tmp_path / "res", {"k": 1})
    rec.add(out)
    rec.release()
    back = RunRecords.open(tmp_path / "res", {"k": 1}, resume=True).completed
    got = back[("A b/c", "verification", 3)]
    assert got["roc"].dtype == np.float64 and got["cmc"].dtype == np.float32
    np.testing.assert_array_equal(got["roc"], out["roc"])
    assert got["tuned"]["params"] == {"fpr_range": (0.0, 0.1), "mu": 1e-3}
    assert np.isnan(got["measures"]["vr"]) and got["measures"]["auc"] == 0.91


def _cli(t, out, *extra, jobs="2"):
    env = {k: v for k, v in os.environ.items() if k != "CROSSMETRIC_DEBUG"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return [sys.executable, "-m", "crossmetric", "benchmark", "--methods",
            "euclidean,cca,pcca,gsm", "--folds", "6", "--repeats", "4", "--out", str(out),
            "--quiet", "--n-jobs", jobs, *extra], env


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT"])
def test_killed_cli_run_resumes_to_the_uninterrupted_result(tmp_path, sig):
    """The real command line, two joblib workers, stopped (SIGKILL / Ctrl-C) once some
    records are on disk; ``--resume`` (with one worker) gives the files of an uninterrupted
    run."""
    t = tmp_path
    argv, env = _cli(t, t / "whole")
    assert subprocess.run(argv, cwd=t, env=env, capture_output=True, timeout=300).returncode == 0
    argv, env = _cli(t, t / "res")
    proc = subprocess.Popen(argv, cwd=t, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while len(_records(t)) < 6 and proc.poll() is None and time.time() - t0 < 120:
        time.sleep(0.02)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (-9 if sig == "SIGKILL" else 130), err
    kept = len(_records(t))
    assert 6 <= kept < 4 * 10 and not (t / "res").exists()
    if sig == "SIGINT":
        assert err.strip().splitlines()[-2].startswith(f"crossmetric: {kept} finished")
    argv, env = _cli(t, t / "res", "--resume", jobs="1")
    r = subprocess.run(argv, cwd=t, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"resuming: {kept} finished (method, split) records kept" in r.stderr
    assert _numbers(t / "res") == _numbers(t / "whole")
    assert sorted(os.listdir(t)) == ["res", "whole"]


@pytest.mark.slow
def test_a_tuned_run_resumes_to_the_same_choices_and_numbers(data, monkeypatch, capsys):
    """--tune: the records hold each split's tuning choice and its candidates' scores."""
    t = data
    methods = "euclidean,gsm,pcca"
    assert main(_args(t, t / "whole", "--tune", methods=methods)) == 0
    _stop_after(monkeypatch, 8)
    assert main(_args(t, t / "res", "--tune", methods=methods)) == 130
    monkeypatch.undo()
    assert main(_args(t, t / "res", "--tune", "--resume", methods=methods)) == 0
    got = _numbers(t / "res")
    assert got == _numbers(t / "whole")
    assert sorted(got["json"]["info"]["tuned"]) == ["GSM", "PCCA"]


@pytest.mark.slow
def test_a_method_whose_worker_process_dies_is_that_methods_failure(data):
    """The real command line with two workers; PCCA's fit kills its process (as a
    segmentation fault or the system's out-of-memory kill would): PCCA is reported as failed,
    Euclidean and CCA are in the result files."""
    t = data
    (t / "site").mkdir()
    (t / "site" / "sitecustomize.py").write_text(
        "import os\n"
        "if os.environ.get('CROSSMETRIC_TEST_KILL_PCCA'):\n"
        "    from crossmetric.learners.pcca import PCCA\n"
        "    def fit(self, *args, **kwargs):\n"
        "        os._exit(9)\n"
        "    PCCA.fit = fit\n")
    env = {k: v for k, v in os.environ.items() if k != "CROSSMETRIC_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join([str(t / "site"), ROOT, env.get("PYTHONPATH", "")])
    env["CROSSMETRIC_TEST_KILL_PCCA"] = "1"
    argv = _args(t, t / "res")
    argv[argv.index("--n-jobs") + 1] = "2"
    r = subprocess.run([sys.executable, "-m", "crossmetric", *argv], cwd=t, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert ("crossmetric: PCCA failed: TerminatedWorkerError: the worker process fitting it "
            "died (EXIT(9))") in r.stderr
    res = json.loads((t / "res" / "results.json").read_text())
    assert res["methods"] == ["Euclidean", "CCA", "PCCA"] and list(res["errors"]) == ["PCCA"]
    assert {r["method"] for r in res["records"]} == {"Euclidean", "CCA"}
    assert len([r for r in res["records"] if r["measure"] == "auc"]) == 2 * 3
