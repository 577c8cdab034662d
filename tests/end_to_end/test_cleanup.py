"""Commands that start processes or make temporary folders clean up on SIGTERM and SIGINT too."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dashgen.evaluation.synthetic_runs import write_run

from conftest import REPO, wait_until

pytestmark = pytest.mark.live

# Each chain below starts a command, kills it at a chosen moment and looks for what it left: 10-30 s
# of waiting each. `make test` keeps the backtest's (the Prometheus most likely left behind), by
# SIGTERM and by SIGKILL; the others are `make test-slow`'s.
slow_chain = pytest.mark.slow


def processes_mentioning(text: str, also: str = "") -> list[int]:
    """PIDs whose command line contains `text` (e.g. a test's own temporary folder) and `also`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                if text.encode() in cmdline and also.encode() in cmdline:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found



def dashgen(args: list[str], tmpdir: Path) -> subprocess.Popen:
    """`dashgen ARGS` with its own $TMPDIR, so what it leaves there can be seen."""
    tmpdir.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "dashgen", *args], cwd=REPO,
                            env={**os.environ, "TMPDIR": str(tmpdir)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigterm_during_backtest_stops_prometheus_and_removes_its_tsdb(tmp_path):
    run_file = write_run(tmp_path / "runs" / "synthetic" / "long.jsonl", "healthy", 400)
    tmpdir = tmp_path / "tmp"
    process = dashgen(["backtest", str(run_file), "--root", str(REPO)], tmpdir)
    try:
        serving = f"{tmpdir}/dashgen-backtest-", "--storage.tsdb.path="
        wait_until(lambda: processes_mentioning(*serving) != [], 120, "prometheus to start")
        prometheus = processes_mentioning(*serving)
        process.send_signal(signal.SIGTERM)  # only dashgen: as `kill PID` or a supervisor does
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        for pid in processes_mentioning(str(tmpdir)):  # never leave a server behind, also if this fails
            os.kill(pid, signal.SIGKILL)
    assert process.returncode == 128 + signal.SIGTERM
    assert "Traceback" not in stderr and "terminated (SIGTERM); cleaned up" in stderr
    assert prometheus and all(not Path(f"/proc/{pid}").exists() or
                              "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2] for pid in prometheus)
    assert processes_mentioning(str(tmpdir)) == []
    assert list(tmpdir.iterdir()) == []


@slow_chain  # a run long enough that promtool is caught at work: 45 s
# Known open bug since the per-step replay (issue 56): the signal ends the main thread's block while the
# engine's worker threads still write blocks and start tools, so a promtool or the work folder can
# outlive the clean-up by a moment (one of the two signals, either one, on a 2-core machine). Not strict:
# it passes where the workers were idle at the signal; the fix is to stop the pools on the signal.
@pytest.mark.xfail(reason="replay worker threads outlive a signal's clean-up (issue 57 follow-up)", strict=False)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_promtool_makes_blocks_leaves_no_head_folder(tmp_path, signum):
    """promtool's TSDB head folder (head*, in its $TMPDIR) stayed in the system's when a SIGTERM cut
    its backtest short; a SIGHUP (a closed terminal) ended dashgen with no clean-up at all."""
    run_file = write_run(tmp_path / "runs" / "synthetic" / "long.jsonl", "healthy", 3000)
    tmpdir = tmp_path / "tmp"
    process = dashgen(["backtest", str(run_file), "--root", str(REPO)], tmpdir)
    try:
        wait_until(lambda: any(tmpdir.rglob("head*")) or process.poll() is not None, 120,
                   "promtool's head folder", interval=0.01)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        for pid in processes_mentioning(str(tmpdir)):
            os.kill(pid, signal.SIGKILL)
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr and f"terminated ({signal.Signals(signum).name}); cleaned up" in stderr
    assert list(tmpdir.iterdir()) == []
    assert processes_mentioning(str(tmpdir)) == []


@slow_chain
def test_sigint_during_promtool_test_leaves_no_head_folders(tmp_path):
    tmpdir = tmp_path / "tmp"
    for attempt in range(3):
        process = dashgen(["test", "--root", str(REPO)], tmpdir)
        try:
            # promtool makes its TSDB head folders in the $TMPDIR dashgen gives it.
            wait_until(lambda: any(p.name.startswith("dashgen-promtool-") and any(p.iterdir())
                                   for p in tmpdir.iterdir()) or process.poll() is not None,
                       60, "promtool", interval=0.02)
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=60)
        finally:
            process.kill()
        assert "Traceback" not in stderr
        assert list(tmpdir.iterdir()) == [], f"left behind (attempt {attempt}): {list(tmpdir.rglob('*'))[:5]}"
        assert processes_mentioning(str(tmpdir)) == []


@slow_chain
def test_sigterm_during_backfill_removes_its_temporary_folder(tmp_path):
    run_file = write_run(tmp_path / "runs" / "synthetic" / "long.jsonl", "healthy", 3000)
    tmpdir = tmp_path / "tmp"
    process = dashgen(["backfill", str(run_file), "--tsdb", str(tmp_path / "tsdb"), "--root", str(REPO)], tmpdir)
    try:
        wait_until(lambda: any(tmpdir.iterdir()) or process.poll() is not None, 60, "the temporary folder")
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert "Traceback" not in stderr
    assert list(tmpdir.iterdir()) == []
    assert processes_mentioning(str(tmpdir)) == []


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("command", ["backtest", pytest.param("preview", marks=slow_chain)])
def test_sigkill_takes_prometheus_along_and_the_next_run_removes_the_temporary_folder(tmp_path, command):
    if command == "preview":
        pytest.importorskip("matplotlib")
    run_file = write_run(tmp_path / "runs" / "synthetic" / "long.jsonl", "healthy", 400)
    tmpdir = tmp_path / "tmp"
    out = ["--out", str(tmp_path / "preview")] if command == "preview" else []
    process = dashgen([command, str(run_file), "--root", str(REPO), *out], tmpdir)
    try:
        serving = f"{tmpdir}/dashgen-{command}-", "--storage.tsdb.path="
        wait_until(lambda: processes_mentioning(*serving) != [], 120, "prometheus to start")
        prometheus = processes_mentioning(*serving)
        process.kill()  # SIGKILL: no clean-up of its own
        process.communicate(timeout=60)
        wait_until(lambda: not any(alive(pid) for pid in prometheus), 10, "prometheus to die with dashgen")
    finally:
        process.kill()
        for pid in processes_mentioning(str(tmpdir)):  # never leave a server behind, also if this fails
            os.kill(pid, signal.SIGKILL)
    [left] = list(tmpdir.iterdir())  # a SIGKILL runs no clean-up ...
    assert left.name.startswith(f"dashgen-{command}-")
    again = dashgen([command, str(write_run(tmp_path / "runs" / "synthetic" / "short.jsonl", "healthy", 20)),
                     "--root", str(REPO), *out], tmpdir)
    _, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr
    assert list(tmpdir.iterdir()) == []  # ... the next run removes what it left


@slow_chain
def test_sigkill_during_drawing_leaves_a_partial_the_next_preview_removes(tmp_path):
    pytest.importorskip("matplotlib")
    run_file = write_run(tmp_path / "runs" / "synthetic" / "long.jsonl", "healthy", 100)
    out = tmp_path / "preview"
    args = ["preview", str(run_file), "--root", str(REPO), "--out", str(out)]
    process = dashgen(args, tmp_path / "tmp")
    try:
        # The second dashboard drawn: the first is drawn already.
        wait_until(lambda: any(out.glob(".verl-training.png.*")) or process.poll() is not None, 120,
                   "the second preview being drawn", interval=0.01)
        process.kill()
        # Not reaped yet: a zombie, whose PID still answers kill(pid, 0), until its parent waits for it.
        wait_until(lambda: not alive(process.pid), 10, "the preview to die")
        assert [p.name for p in out.glob("*.png")] == []  # none replaced before all are drawn
        again = dashgen(args, tmp_path / "tmp")
        _, stderr = again.communicate(timeout=300)
    finally:
        process.kill()
        process.communicate(timeout=60)
        for pid in processes_mentioning(str(tmp_path / "tmp")):
            os.kill(pid, signal.SIGKILL)
    assert again.returncode == 0, stderr
    assert sorted(p.name for p in out.iterdir()) == ["verl-compare-runs.png", "verl-training.png"]
