"""Bad command-line input: one clear error and a non-zero exit before any long work, never a traceback."""

import json
import os
import stat
import time

import pytest
from dashgen.evaluation.synthetic_runs import write_run

from conftest import REPO, run, tree_digest


@pytest.fixture(scope="module")
def run_file(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("runs") / "synthetic" / "short.jsonl", "healthy", 20)


@pytest.mark.parametrize("command", ["backtest", "backfill"])
@pytest.mark.parametrize("args, expected", [
    (["--start", "nan"], "--start 'nan': not a time between 1970-01-01 and 9999-12-31"),
    (["--start", "inf"], "--start 'inf': not a time"),
    (["--start", "-1e11"], "--start '-1e11': not a time"),
    (["--start", "1e300"], "--start '1e300': not a time"),
    (["--start", "yesterday"], "--start 'yesterday': expected Unix seconds or RFC 3339"),
    (["--hold", "100000y"], "--hold 100000y: 2.1e+11 scrapes at --scrape-interval 15s; at most 1,000,000 per run"),
    (["--scrape-interval", "1ms"], "--scrape-interval 1ms: must be at least 1s"),
    (["--scrape-interval", "0s"], "--scrape-interval 0s: must be at least 1s"),
    (["--default-step-time", "0s"], "--default-step-time 0s: must be longer than 0s"),
    (["--default-step-time", "soon"], "--default-step-time 'soon' is not a Prometheus duration"),
])
def test_bad_timing_options(tmp_path, run_file, command, args, expected):
    where = ["--root", str(REPO)] + (["--tsdb", str(tmp_path / "tsdb")] if command == "backfill" else [])
    result = run(command, str(run_file), *where, *args)
    assert result.exit_code == 1 and expected in result.output, result.output
    assert not (tmp_path / "tsdb").exists()


@pytest.mark.parametrize("command", ["backtest", "backfill"])
def test_step_times_too_long_to_sample_are_refused(tmp_path, command):
    log = tmp_path / "p" / "e.jsonl"
    log.parent.mkdir()
    log.write_text("".join(json.dumps({"step": n, "data": {"timing_s/step": 1e10, "actor/ppo_kl": 0.1}}) + "\n"
                           for n in range(1, 4)))
    where = ["--root", str(REPO)] + (["--tsdb", str(tmp_path / "tsdb")] if command == "backfill" else [])
    result = run(command, str(log), *where)
    assert result.exit_code == 1
    assert f"{log}: the run spans 2e+10 s (its timing_s/step values sum to 3e+10 s" in result.output, result.output
    assert "at most 1,000,000 per run" in result.output


@pytest.mark.parametrize("command", ["backtest", "backfill", "preview"])
def test_a_run_of_a_million_steps_is_refused_at_once_naming_the_limit_and_how_to_lift_it(tmp_path, command):
    """Scale as a fault: a 200,000-step backfill ran 9 minutes, a million-step backtest did not end in 9."""
    log = tmp_path / "p" / "e.jsonl"
    log.parent.mkdir()
    with open(log, "w") as handle:
        handle.writelines('{"step": %d, "data": {"actor/ppo_kl": 0.01}}\n' % step for step in range(1, 1_000_001))
    where = {"backfill": ["--tsdb", str(tmp_path / "tsdb")], "preview": ["--out", str(tmp_path / "png")]}
    started = time.monotonic()
    result = run(command, str(log), "--root", str(REPO), *where.get(command, []))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{log}: more than 50,000 step-log lines; a replay of that many takes tens of minutes" in result.output
    assert "Give --max-steps with a larger number, or 0, to replay it anyway" in result.output
    assert time.monotonic() - started < 60  # seconds (a compile, and 50,001 lines counted), not minutes
    assert not (tmp_path / "tsdb").exists() and not (tmp_path / "png").exists()


def test_max_steps_sets_the_limit_and_a_long_replay_says_it_takes_minutes(tmp_path, run_file, monkeypatch):
    import dashgen.cli.replay

    result = run("backfill", str(run_file), "--root", str(REPO), "--tsdb", str(tmp_path / "tsdb"), "--max-steps", "19")
    assert result.exit_code == 1 and "more than 19 step-log lines" in result.output, result.output
    monkeypatch.setattr(dashgen.cli.replay, "LONG_REPLAY_STEPS", 10)
    result = run("backfill", str(run_file), "--root", str(REPO), "--tsdb", str(tmp_path / "tsdb"), "--max-steps", "20")
    assert result.exit_code == 0, result.output
    assert f"dashgen backfill: {run_file}: 20 step-log lines; replaying them takes minutes" in result.stderr


@pytest.mark.parametrize("command", ["backtest", "backfill"])
def test_a_fifo_as_the_run_is_refused_instead_of_blocking(tmp_path, command):
    fifo = tmp_path / "p" / "e.jsonl"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    where = ["--root", str(REPO)] + (["--tsdb", str(tmp_path / "tsdb")] if command == "backfill" else [])
    result = run(command, str(fifo), *where)
    assert result.exit_code == 1 and f"{fifo}: not a regular file" in result.output, result.output


def test_tsdb_under_a_file_is_refused_before_reading_the_run(tmp_path, run_file):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = run("backfill", str(run_file), "--tsdb", str(blocker / "sub"), "--root", str(REPO))
    assert result.exit_code == 1 and f"--tsdb {blocker / 'sub'}: {blocker} is not a folder" in result.output


@pytest.mark.parametrize("plot, status, expected", [
    ("missing/plot.png", 1, "the folder {tmp}/missing does not exist"),
    ("plot.txt", 1, "name a .png, .pdf, .svg file"),
    (".", 2, "is a directory"),
    ("x" * 300 + ".png", 1, "cannot be written: File name too long"),
])
def test_a_bad_plot_path_fails_at_once(tmp_path, run_file, plot, status, expected):
    result = run("backtest", str(run_file), "--root", str(REPO), "--plot", str(tmp_path / plot))
    assert result.exit_code == status and expected.format(tmp=tmp_path) in result.output, result.output
    assert "dashgen backtest:" not in result.output  # failed before the run was read


def test_the_plot_check_leaves_no_file_behind(tmp_path, run_file):
    plot = tmp_path / "plot.png"
    result = run("backtest", str(run_file), "--root", str(REPO), "--plot", str(plot), "--rules", str(tmp_path / "no"))
    assert result.exit_code == 1 and "--rules" in result.output, result.output
    assert not plot.exists()


def test_root_missing_or_without_definitions(tmp_path):
    result = run("build", "--root", str(tmp_path / "nowhere"))
    assert result.exit_code == 2 and "does not exist" in result.output
    for command in ("build", "check", "list"):
        result = run(command, "--root", str(tmp_path))
        assert result.exit_code == 1 and "alerts/: no such folder" in result.output, result.output
    (tmp_path / "alerts").mkdir()
    (tmp_path / "alerts" / "_helpers.py").write_text("")
    result = run("build", "--root", str(tmp_path))
    assert result.exit_code == 1 and "alerts/: no definition modules (expected alerts/*.py" in result.output
    assert not (tmp_path / "rendered").exists()


@pytest.mark.parametrize("source, expected", [
    ("import sys\nsys.exit(3)\n", "panels/zz_exit.py: importing the module called sys.exit(3)"),
    ("import sys\ndef dashboard(config):\n    sys.exit('bye')\n",
     "panels/zz_exit.py: dashboard() called sys.exit('bye')"),
])
def test_a_definition_calling_sys_exit_is_named(project, source, expected):
    (project / "panels" / "zz_exit.py").write_text(source)
    result = run("build", "--root", str(project))
    assert result.exit_code == 1 and expected in result.output, result.output


def test_a_promtool_that_cannot_run_is_named(tmp_path, monkeypatch):
    script = tmp_path / "promtool"
    script.write_bytes(b"\x00\x01not a program")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PROMTOOL", str(script))
    result = run("lint", "--root", str(REPO))
    assert result.exit_code == 1 and f"cannot run promtool ({script}): Exec format error" in result.output
    monkeypatch.setenv("PROMTOOL", str(tmp_path))
    result = run("lint", "--root", str(REPO))
    assert result.exit_code == 1 and "which is not an executable file" in result.output
    assert os.access(script, os.X_OK)


def test_a_vmalert_that_cannot_run_or_is_not_a_file_is_named_not_skipped(project, tmp_path, monkeypatch):
    (project / "dashgen.yaml").write_text("victoriametrics: true\n")
    script = tmp_path / "vmalert"
    script.write_bytes(b"\x00\x01not a program")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    before = tree_digest(project / "rendered")
    for vmalert, expected in ((script, f"cannot run vmalert ({script}): Exec format error"),
                              (tmp_path, f"$VMALERT is set to {str(tmp_path)!r}, which is not an executable file")):
        monkeypatch.setenv("VMALERT", str(vmalert))
        result = run("build", "--root", str(project))
        assert result.exit_code == 1 and result.output == f"Error: {expected}\n", result.output
        assert tree_digest(project / "rendered") == before
