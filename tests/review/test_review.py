"""`dashgen review` in a `dashgen init` project whose labelled runs are the public corpus: a change
that pages healthy runs fails the review and names them; no change passes; bad input is one clear
error naming the file; the working tree and rendered/ are left as they were."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from dashgen.review.corpus import public_corpus
from conftest import REPO
from support import dashgen_command

pytestmark = [pytest.mark.live, pytest.mark.heavy]

# VerlRewardCliff on a 5% dip, with no floor: it pages healthy runs whose reward wobbles.
TOUCHY_REWARD_CLIFF = "rewards:\n  reward_cliff_drop_fraction: 0.05\n  reward_cliff_min_drop: 0\n  reward_cliff_noise_z: 0\n"


def dashgen(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(dashgen_command(*args), cwd=project, capture_output=True, text=True, timeout=300)


def git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=project, check=True,
                   capture_output=True)


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file below `folder` but .git's: its bytes and modification time."""
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file() and ".git" not in p.relative_to(folder).parts}


@pytest.fixture(scope="module")
def team(tmp_path_factory) -> Path:
    """A built, committed `dashgen init` project with the public corpus as its runs/."""
    project = tmp_path_factory.mktemp("review") / "team"
    assert dashgen(project.parent, "init", str(project)).returncode == 0
    for run in sorted(public_corpus().iterdir()):
        if (run / "run.yaml").is_file():
            (project / "runs" / run.name).mkdir()
            for name in ("run.yaml", "steps.jsonl"):
                shutil.copy(run / name, project / "runs" / run.name / name)
    assert dashgen(project, "build").returncode == 0
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "the team's project")
    return project


@pytest.mark.slow  # a review of every labelled run, both revisions backtested
def test_a_reward_cliff_on_a_five_percent_dip_fails_the_review_and_names_the_healthy_runs_it_pages(team):
    config = team / "dashgen.yaml"
    original = config.read_text()
    config.write_text(original + TOUCHY_REWARD_CLIFF)
    before = snapshot(team)
    try:
        result = dashgen(team, "review", "--base", "HEAD")
        as_json = dashgen(team, "review", "--base", "HEAD", "--json", "--accept")
    finally:
        after = snapshot(team)
        config.write_text(original)
    assert result.returncode == 1, result.stderr
    assert before == after  # nor rendered/ (still the committed build) nor any other file changed
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 0 and report["regressed"]
    # A critical is forbidden on a degrading run too, so a page there is as much a regression.
    verdicts = {run["run"]: run["verdict"] for run in report["runs"]}
    newly_paged = sorted(run["run"] for run in report["runs"]
                         if run["verdict"] in ("healthy", "degrading") and run["regressions"])
    assert any(verdicts[run] == "healthy" for run in newly_paged)
    # The cliff's floor and noise guard are VerlRewardCollapse's too (issue 52): either pages newly.
    cliff_alerts = ("VerlRewardCliff", "VerlRewardCollapse")
    for run in newly_paged:
        entry = next(r for r in report["runs"] if r["run"] == run)
        newly = {f["alertname"] for f in entry["after"]["fired"]} - {f["alertname"] for f in entry["before"]["fired"]}
        assert newly & set(cliff_alerts), (run, newly)
        assert any(reason.startswith(f"newly paged by {name}") for reason in entry["regressions"] for name in cliff_alerts)
    # The Markdown names them (the first LISTED_RUNS of them; the rest are counted).
    first = newly_paged[0] if len(newly_paged) == 1 else None
    assert "### Got worse" in result.stdout and (first is None or f"`{first}`" in result.stdout)
    pages = {name: next(a for a in report["alerts"] if a["alertname"] == name)["pages"] for name in cliff_alerts}
    assert sorted(set().union(*(set(p["after"]) - set(p["before"]) for p in pages.values()))) == newly_paged
    assert result.stdout.startswith("## dashgen review: HEAD → working tree\n")
    assert f"{len(newly_paged)} runs got worse" in result.stdout.splitlines()[2]


# Every eighth labelled run of the corpus: both splits, healthy and failing runs (asserted below).
SAMPLED = pytest.param(8, id="every-eighth-run")
WHOLE_CORPUS = pytest.param(1, id="whole-corpus", marks=pytest.mark.slow)


@pytest.mark.parametrize("every", [SAMPLED, WHOLE_CORPUS])
def test_without_a_change_the_review_passes_and_reports_no_difference(team, every):
    runs = sorted((team / "runs").glob("*/run.yaml"))[::every]
    labels = [yaml.safe_load(path.read_text()) for path in runs]
    assert {label["split"] for label in labels} == {"tune", "holdout"}
    assert {label["verdict"] for label in labels} >= {"healthy", "failure"}
    chosen = [] if every == 1 else [str(path.parent.relative_to(team)) for path in runs]
    result = dashgen(team, "review", "--base", "HEAD", *chosen)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2].startswith(f"**no difference: {len(runs)} runs;")
    assert "### Got worse" not in result.stdout and "**" not in "".join(result.stdout.splitlines()[3:])


def test_a_rendered_folder_as_base_and_unlabelled_runs(team, tmp_path):
    unlabelled = tmp_path / "raw-log-only"
    unlabelled.mkdir()
    shutil.copy(team / "runs" / "verl-gemma2-2b-gsm8k-ppo" / "steps.jsonl", unlabelled / "steps.jsonl")
    nan_kl = tmp_path / "nan-kl"  # KL is NaN from the first step
    nan_kl.mkdir()
    shutil.copy(team / "runs" / "trl-openr1-kl-nan-issue704" / "steps.jsonl", nan_kl / "steps.jsonl")
    (nan_kl / "run.yaml").write_text("verdict: failure\nonset_step: 1\ncritical: true\nsplit: holdout\n")
    result = dashgen(team, "review", "--base", "rendered", str(unlabelled), str(nan_kl))
    assert result.returncode == 0, result.stderr
    assert "2 runs fired the same warnings and criticals before and after" in result.stdout
    assert ("| holdout | healthy clean 0/0, failures caught 1/1, time to catch median 0, p90 0, worst 0 logged steps, "
            "false critical pages 0 |") in result.stdout


def broken_runs(tmp_path: Path, meta: str) -> Path:
    run = tmp_path / "runs" / "one"
    run.mkdir(parents=True)
    shutil.copy(public_corpus() / "verl-gemma2-2b-gsm8k-ppo" / "steps.jsonl", run / "steps.jsonl")
    (run / "run.yaml").write_text(meta)
    return run


@pytest.mark.parametrize("meta, message", [
    ("verdict: broken\n", "run.yaml: verdict: 'broken'; expected one of healthy, degrading, failure"),
    ("verdict: failure\nonset_step: 5000\n", "run.yaml: onset_step 5000 is beyond the run's last logged step"),
])
def test_a_bad_verdict_file_is_one_error_naming_it(team, tmp_path, meta, message):
    run = broken_runs(tmp_path, meta)
    result = dashgen(team, "review", "--base", "HEAD", str(run))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == f"Error: {run / 'run.yaml'}: {message.removeprefix('run.yaml: ')}" + (
        "" if "beyond" not in message else " (105, in steps.jsonl)") + "\n"


def test_a_steps_file_the_backtest_cannot_read_is_one_error_naming_it(team, tmp_path):
    run = broken_runs(tmp_path, "verdict: healthy\n")
    (run / "steps.jsonl").write_text("not a step log\n")
    result = dashgen(team, "review", "--base", "HEAD", str(run))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"Error: {run / 'steps.jsonl'}")


def test_a_base_that_does_not_build_is_one_error_naming_the_module(team):
    module = team / "alerts" / "rewards.py"
    good = module.read_text()
    module.write_text(good + "\nraise RuntimeError('half-finished edit')\n")
    git(team, "commit", "-qam", "a broken alert module")
    module.write_text(good)
    try:
        result = dashgen(team, "review", "--base", "HEAD", "runs/trl-openr1-kl-nan-issue704")
    finally:
        git(team, "reset", "-q", "--hard", "HEAD~1")
    assert result.returncode == 1 and "Traceback (most recent call last)" not in result.stderr
    assert result.stderr.startswith("Error: --base HEAD: the rules there do not build:\nalerts/rewards.py: importing "
                                    "the module failed: RuntimeError: half-finished edit")


@pytest.mark.parametrize("make_bad, message", [
    (lambda path: path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe"), "not text (binary data)"),
    (lambda path: path.write_text("groups: [rules: {"), "not a Prometheus rule file as dashgen renders it"),
    (lambda path: path.write_text("groups:\n- name: g\n  rules:\n  - alert: A\n"), "KeyError: 'expr'"),
    (lambda path: path.mkdir(), "not a file"),
])
def test_a_base_rule_file_that_is_no_rule_file_is_one_error_naming_it(tmp_path, make_bad, message):
    from dashgen.errors import BuildError
    from dashgen.review.revisions import compared_rules

    base = tmp_path / "rendered"
    shutil.copytree(REPO / "rendered" / "rules", base / "rules")
    make_bad(base / "rules" / "zz-broken.yaml")
    with pytest.raises(BuildError) as error:
        compared_rules(REPO, str(base))
    assert f"--base {base}: rules/zz-broken.yaml" in str(error.value) or \
        f"--base {base / 'rules' / 'zz-broken.yaml'}" in str(error.value)
    assert message in str(error.value)


@pytest.mark.live
def test_a_project_in_a_subfolder_of_its_repository_is_reviewed_against_head(tmp_path):
    repo = tmp_path / "repo"
    assert dashgen(tmp_path, "init", str(repo / "monitoring")).returncode == 0
    assert dashgen(repo / "monitoring", "build").returncode == 0
    (repo / "README.md").write_text("the team's repository\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "monitoring in a subfolder")
    run = public_corpus() / "verl-ui-tars-7b-gui-cursor-grpo"
    result = dashgen(repo / "monitoring", "review", "--base", "HEAD", str(run))
    assert result.returncode == 0, result.stderr
    assert "**no difference: 1 run;" in result.stdout


def test_a_base_whose_alerts_never_return_is_stopped_and_named(tmp_path, monkeypatch):
    from dashgen.errors import BuildError
    from dashgen.review import revisions

    project = tmp_path / "loops"
    assert dashgen(tmp_path, "init", str(project)).returncode == 0
    (project / "alerts" / "forever.py").write_text("while True:\n    pass\n")
    monkeypatch.setattr(revisions, "COMPILE_SECONDS", 5)
    started = []
    real_started = revisions._started
    monkeypatch.setattr(revisions, "_started", lambda root: started.append(real_started(root)) or started[-1])
    with pytest.raises(BuildError, match="did not compile within 5 s"):
        revisions._compile(project, "the base's rules")
    assert started and all(process.poll() is not None for process in started)  # killed and reaped
