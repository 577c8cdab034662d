"""A team adopts dashgen: the wheel carries the verl defaults, `dashgen init` makes a project
on them, the project declares its own metrics, and a folder without definitions is refused."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run
from dashgen.errors import BuildError
from dashgen.project_metrics import project_catalog
from dashgen.runtime.exporter import RunState

JUDGE = """metrics:
  - name: verl_judge_mean
    type: gauge
    unit: none
    help: Mean score the LLM judge gave the step's responses
    verl_keys: [judge/score/mean]
"""
JUDGE_ROW = ('    Row("Our metrics", (TimeSeries("Judge score", '
             '(Query("verl_judge_mean{run}", "{{experiment}}"),)),)),\n')


def add_judge_panel(project: Path) -> None:
    (project / "metrics.yaml").write_text(JUDGE)
    module = project / "panels" / "verl_training.py"
    text = module.read_text()
    marker = "TEAM_ROWS: tuple[Row, ...] = (\n"
    assert marker in text
    module.write_text(text.replace(marker, marker + JUDGE_ROW))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """dashgen as a wheel built from this checkout, installed (without its dependencies, which
    this venv has) into a folder of its own: nothing of the checkout is importable from it."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(work / "dist"), str(REPO)], check=True, capture_output=True)
    wheel, = (work / "dist").glob("dashgen_rl-*.whl")
    target = work / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    return target


def dashgen(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    # A limit that fails a hung command, not a speed goal: `dashgen test` of every generated case
    # and a review of the public corpus take minutes on a loaded 2-core machine.
    return subprocess.run([sys.executable, "-m", "dashgen", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.heavy
@pytest.mark.slow  # the wheel's project built, checked and rule-tested from the installed copy
def test_installed_wheel_inits_a_project_that_builds_and_checks(installed, tmp_path):
    where = subprocess.run([sys.executable, "-c", "import dashgen, dashgen_panels, dashgen_alerts; "
                            "print(dashgen.__file__, dashgen_panels.__file__, dashgen_alerts.__file__)"],
                           env={**os.environ, "PYTHONPATH": str(installed)}, cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.split()
    assert all(Path(path).is_relative_to(installed) for path in where), where

    project = tmp_path / "team"
    result = dashgen(installed, tmp_path, "init", str(project))
    assert result.returncode == 0, result.stderr
    assert {"dashgen.yaml", "metrics.yaml", "Makefile", "panels", "alerts", "tests"} <= {
        p.name for p in project.iterdir()}
    for command in (("build",), ("check",)):
        result = dashgen(installed, project, *command)
        assert result.returncode == 0, result.stdout + result.stderr
    model = json.loads((project / "rendered/dashboards/verl-training.json").read_text())
    assert model["title"] == "verl RL training"
    rules = [rule for path in (project / "rendered/rules").glob("*.yaml")
             for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]]
    assert len([rule for rule in rules if "alert" in rule]) >= 13
    # The copied rule tests pass against the project's own rendered rules.
    result = dashgen(installed, project, "test")
    assert result.returncode == 0, result.stdout + result.stderr

    add_judge_panel(project)
    result = dashgen(installed, project, "build")
    assert result.returncode == 0, result.stdout + result.stderr
    model = json.loads((project / "rendered/dashboards/verl-training.json").read_text())
    exprs = [t["expr"] for p in model["panels"] for t in p.get("targets", [])]
    assert any(e.startswith("verl_judge_mean{") for e in exprs)


@pytest.mark.live
@pytest.mark.heavy
@pytest.mark.slow  # a review of the public corpus from the installed wheel
def test_the_wheel_carries_the_public_corpus_for_a_review_without_a_clone(installed, tmp_path):
    corpus = installed / "dashgen_runs"
    runs = sorted(folder.name for folder in corpus.iterdir() if (folder / "run.yaml").is_file())
    assert len(runs) == len(list((REPO / "bench" / "realruns").glob("*/run.yaml"))) >= 28
    assert all((corpus / name / "steps.jsonl").is_file() for name in runs)
    project = tmp_path / "team"
    assert dashgen(installed, tmp_path, "init", str(project)).returncode == 0
    assert (project / "runs" / "README.md").read_text().startswith("# Labelled runs")
    assert dashgen(installed, project, "build").returncode == 0
    # No git history: the base is a rendered folder (here the same rules, so nothing changes).
    result = dashgen(installed, project, "review", "--base", "rendered", "--public-corpus")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2].startswith(f"**no difference: {len(runs)} runs;")


@pytest.mark.live
@pytest.mark.heavy
@pytest.mark.slow  # a project from the installed wheel, built, and a corpus run backfilled and drawn
def test_the_wheels_project_previews_without_a_repository_file(installed, tmp_path):
    """No examples/ folder, no clone: `dashgen preview` with no run draws the public corpus' verl run
    the wheel ships, says how many panels had data, and exits 0 though that run leaves some empty."""
    project = tmp_path / "team"
    assert dashgen(installed, tmp_path, "init", str(project)).returncode == 0
    assert dashgen(installed, project, "build").returncode == 0
    result = dashgen(installed, project, "preview")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "drawing verl-qwen25-7b-gsm8k-ppo-dstack of the public corpus" in result.stderr
    drawn = re.findall(r"rendered/preview/(verl-[a-z-]+)\.png: (\d+) of (\d+) panels with data", result.stdout)
    assert sorted(name for name, _, _ in drawn) == ["verl-compare-runs", "verl-training"], result.stdout
    assert all(0 < int(with_data) <= int(panels) for _, with_data, panels in drawn), drawn
    assert (project / "rendered" / "preview" / "verl-training.png").read_bytes().startswith(b"\x89PNG")


def test_init_refuses_to_overwrite(tmp_path):
    assert run("init", str(tmp_path)).exit_code == 0
    result = run("init", str(tmp_path))
    assert result.exit_code == 1 and "already holds" in result.output and "dashgen.yaml" in result.output


@pytest.mark.parametrize("link", ["dashgen.yaml", "alerts", "tests/rules"])
def test_init_never_writes_through_a_symlink_out_of_the_project(tmp_path, link):
    project, outside = tmp_path / "project", tmp_path / "outside"
    (project / link).parent.mkdir(parents=True)
    (project / link).symlink_to(outside / "target")  # dangling: nothing there yet
    result = run("init", str(project))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{project / link}" in result.output
    assert not outside.exists()
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("*")) == \
        sorted({link, *(str(parent) for parent in Path(link).parents if str(parent) != ".")})


def test_init_follows_a_symlinked_folder_inside_the_project(tmp_path):
    project = tmp_path / "project"
    (project / "team-alerts").mkdir(parents=True)
    (project / "alerts").symlink_to("team-alerts")
    assert run("init", str(project)).exit_code == 0
    assert (project / "team-alerts" / "stability.py").is_file()


@pytest.mark.parametrize("exists", [False, True])
def test_a_write_error_during_init_leaves_no_half_project(tmp_path, exists):
    """A file-size limit makes the larger files fail to write, as a full disk would."""
    import resource
    import signal

    project = tmp_path / "project"
    if exists:
        project.mkdir()
        (project / "README.md").write_text("ours\n")

    def small_files_only() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    result = subprocess.run([sys.executable, "-m", "dashgen", "init", str(project)], capture_output=True,
                            text=True, timeout=120, preexec_fn=small_files_only, env={**os.environ,
                                                                                       "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "cannot write the project" in result.stderr and "File too large" in result.stderr
    if exists:
        assert [p.name for p in project.iterdir()] == ["README.md"]
    else:
        assert not project.exists()


@pytest.mark.parametrize("where, expected", [
    ("a" * 300, "cannot be the project folder: File name too long"),
    ("new/deeper/" + "a" * 300 + "/project", "cannot create the project folder: File name too long; nothing was left"),
    ("loop/project", "cannot be the project folder: a symlink on the way leads back to itself"),
], ids=["a name too long", "a name too long below new folders", "through a symlink loop"])
def test_init_into_a_folder_that_cannot_be_is_one_clear_error_leaving_nothing(tmp_path, where, expected):
    (tmp_path / "loop").symlink_to("loop")
    result = run("init", str(tmp_path / where))
    assert result.exit_code == 1 and result.output.startswith(f"Error: {tmp_path / where}: {expected}"), result.output
    assert [p.name for p in tmp_path.iterdir()] == ["loop"]


@pytest.mark.parametrize("name", ["", "  "])
def test_init_refuses_an_empty_name(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    result = run("init", name)
    assert result.exit_code == 1 and "give the project's folder" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.heavy
def test_dashgen_test_runs_a_module_of_recordings_only():
    result = run("test", "gpu", "--root", str(REPO))
    assert result.exit_code == 0, result.output
    assert "no alert module" not in result.output and "SUCCESS" in result.output


def test_a_keep_generated_folder_that_cannot_be_made_is_a_clear_error():
    result = run("test", "--root", str(REPO), "--keep-generated", "/dev/null/x")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "--keep-generated /dev/null/x: cannot create that folder" in result.output


def test_dashgen_test_before_the_first_build_is_one_error_naming_the_fixture_and_the_build(team):
    result = run("test", "--root", str(team))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.count("Error:") == 1 and "got: nil" not in result.output
    assert f"{team}/tests/rules/gpu-test.yaml: its rule file ../../rendered/rules/gpu.yaml matches no file" in result.output
    assert "run `dashgen build` first" in result.output


@pytest.mark.parametrize("kind, message", [
    ("binary", "not UTF-8 text (byte 0xff at offset 0): a binary file?"),
    ("nul", "a binary file (a NUL byte at offset 7), not text"),
    ("folder", "cannot be read: Is a directory"),
    ("unreadable", "cannot be read: Permission denied"),
])
def test_a_binary_or_unreadable_fixture_is_one_error_naming_it(team, kind, message):
    """Read as bytes first: a UnicodeDecodeError or PermissionError traceback before."""
    fixture = team / "tests" / "rules" / "zz-test.yaml"
    if kind == "binary":
        fixture.write_bytes(b"\xff\xfe tests: []\n")
    elif kind == "nul":
        fixture.write_bytes(b"tests: \x00[]\n")
    elif kind == "folder":
        fixture.mkdir()
    else:
        if os.geteuid() == 0:
            pytest.skip("root reads a file of mode 000")
        fixture.write_text("tests: []\n")
        fixture.chmod(0)
    result = run("test", "--root", str(team))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.count("Error:") == 1
    assert f"{fixture}: {message}" in result.output


@pytest.mark.parametrize("command", ["build", "check", "list", "lint", "test"])
def test_a_folder_without_definitions_is_a_clear_error(tmp_path, command):
    result = run(command, "--root", str(tmp_path))
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert "alerts" in result.output or "rules" in result.output or "rule test" in result.output


def test_a_project_without_dashboards_is_a_clear_error(tmp_path):
    assert run("init", str(tmp_path)).exit_code == 0
    for module in (tmp_path / "panels").glob("*.py"):
        module.unlink()
    result = run("build", "--root", str(tmp_path))
    assert result.exit_code == 1 and "panels/: no definition modules" in result.output


def test_project_metrics_join_the_catalog_and_the_exporter(tmp_path):
    assert run("init", str(tmp_path)).exit_code == 0
    add_judge_panel(tmp_path)
    assert run("build", "--root", str(tmp_path)).exit_code == 0
    catalog = project_catalog(tmp_path)
    assert catalog["verl_judge_mean"].verl_keys == ("judge/score/mean",)
    state = RunState("p", "e", catalog=catalog)
    state.record(3, {"judge/score/mean": 0.75})
    served = {sample.name: sample.value for family in state.collect() for sample in family.samples}
    assert served["verl_judge_mean"] == 0.75 and "verl_judge_score_mean" not in served


def test_a_key_the_run_logs_under_another_name_is_read_through_an_alias(tmp_path):
    """VerlSignalNeverLogged names a key the run logs that no series reads; aliases: in metrics.yaml reads it."""
    (tmp_path / "metrics.yaml").write_text("aliases:\n  timing_ms/gen: timing_s/gen\n")
    catalog = project_catalog(tmp_path)
    assert catalog.verl_key_map()["timing_ms/gen"].name == "verl_timing_gen_seconds"
    assert catalog["verl_timing_gen_seconds"].verl_keys[0] == "timing_s/gen"  # dashgen's own name stays first
    state = RunState("p", "e", catalog=catalog)
    state.record(3, {"timing_ms/gen": 12.5})
    served = {sample.name: sample.value for family in state.collect() for sample in family.samples}
    assert served["verl_timing_gen_seconds"] == 12.5
    for aliases, message in (("{timing_ms/gen: timing_s/nothing}", "'timing_s/nothing' is no key dashgen reads"),
                             ("{actor/entropy_loss: actor/entropy}", "it is already read by verl_actor_entropy"),
                             ("[timing_ms/gen]", "aliases: expected a mapping")):
        (tmp_path / "metrics.yaml").write_text(f"aliases: {aliases}\n")
        with pytest.raises(BuildError, match=re.escape(message)):
            project_catalog(tmp_path)


@pytest.mark.parametrize("entry, message", [
    ("{name: verl_actor_ppo_kl, type: gauge, unit: none, help: x}", "dashgen's catalog already declares it"),
    ("{name: verl_x, type: summary, unit: none, help: x}", "type 'summary'; expected one of gauge, counter"),
    ("{name: verl_x, type: gauge, unit: none, help: x, verl_keys: [actor/ppo_kl]}",
     "verl key 'actor/ppo_kl' is already read by verl_actor_ppo_kl"),
    ("{name: 'bad-name', type: gauge, unit: none, help: x}", "is not a Prometheus metric name"),
    ("{name: verl_x, type: gauge, unit: none, help: x, colour: red}", "unknown field(s) colour"),
    ("{name: team_x, type: gauge, unit: none, help: x, labels: ['a-b']}", "'a-b' is not a label name"),
])
def test_bad_project_metrics_name_the_file_and_the_entry(tmp_path, entry, message):
    assert run("init", str(tmp_path)).exit_code == 0
    (tmp_path / "metrics.yaml").write_text(f"metrics:\n  - {entry}\n")
    result = run("build", "--root", str(tmp_path))
    assert result.exit_code == 1, result.output
    assert str(tmp_path / "metrics.yaml") in result.output and message in result.output
    assert not (tmp_path / "rendered").exists()


def test_a_labelled_team_metric_is_checked_on_its_labels(tmp_path):
    assert run("init", str(tmp_path)).exit_code == 0
    (tmp_path / "metrics.yaml").write_text(
        "metrics:\n  - {name: team_queue_depth, type: gauge, unit: short, help: x, labels: [queue]}\n")
    module = tmp_path / "panels" / "verl_training.py"
    marker = "TEAM_ROWS: tuple[Row, ...] = (\n"
    module.write_text(module.read_text().replace(marker, marker + (
        '    Row("Queues", (TimeSeries("Depth", (Query("sum by (queue, shard) (team_queue_depth)"),)),)),\n')))
    result = run("build", "--root", str(tmp_path))
    assert result.exit_code == 1 and "shard" in result.output, result.output


@pytest.mark.heavy
def test_a_project_with_its_own_runbook_url_passes_the_shipped_fixtures(team):
    """A team that points runbook links at its own wiki keeps the fixtures `dashgen init` copied:
    `dashgen test` expects the project's links where they expect dashgen's default."""
    config = team / "dashgen.yaml"
    config.write_text(config.read_text() + "\nrunbook_base_url: https://wiki.example.org/verl-runbook.md\n")
    assert run("build", "--root", str(team)).exit_code == 0
    rules = (team / "rendered" / "rules" / "stability.yaml").read_text()
    assert "runbook_url: https://wiki.example.org/verl-runbook.md#verltrainingdivergence" in rules
    result = run("test", "--root", str(team))
    assert result.exit_code == 0, result.output
