"""Every signal verl logs has a panel or is left out on purpose, with the reason in code."""

from pathlib import Path

from conftest import REPO, run
from dashgen.catalog import CATALOG
from dashgen.compiler.project import compile_project
from dashgen.compiler.dashboards.coverage import unused_signals, verl_signals
from dashgen.config import Config

# The pinned list: a key added to the catalog needs a panel or a LeftOut with its reason.
LEFT_OUT = {"perf/time_per_step", "critic/score/std", "sampling/sampling_logp_difference/max",
            *(f"sampling/importance_sampling_ratio/{stat}" for stat in ("min", "mean", "max"))}


def test_every_catalogued_verl_key_has_a_panel_or_a_reason():
    config = Config()
    unused = unused_signals(compile_project(REPO, config).dashboards, config, CATALOG)
    assert {signal.verl_key for signal in unused} == LEFT_OUT
    assert all(signal.reason for signal in unused), [s.verl_key for s in unused if not s.reason]


def test_signals_cover_validation_and_every_timing_stage():
    signals = verl_signals(CATALOG)
    assert signals["val-aux/..."] == "verl_val_aux" and signals["timing_s/save_checkpoint"].endswith("_seconds")
    assert signals["actor/entropy"] == "verl_actor_entropy"  # the current key, not its old alias


def test_list_unused_names_each_key_and_its_reason():
    result = run("list", "--unused", "--root", str(REPO))
    assert result.exit_code == 0, result.output
    assert "perf/time_per_step  (verl_perf_time_per_step)  left out: the same wall time" in result.output


def test_a_panel_removed_shows_up_without_a_reason(project: Path):
    module = project / "panels" / "verl_training.py"
    text = module.read_text()
    row = ('Row("Rewards, advantages and values", (rewards, advantages, returns, values, equal_reward_groups),\n'
           '                collapsed=True),')
    assert row in text
    module.write_text(text.replace(row, ""))
    result = run("list", "--unused", "--root", str(project))
    assert result.exit_code == 0, result.output
    assert "critic/advantages/mean  (verl_critic_advantages_mean)  no panel, and no reason given" in result.output


def test_leaving_out_an_unknown_key_is_named(project: Path):
    module = project / "panels" / "verl_training.py"
    module.write_text(module.read_text().replace('LeftOut("perf/time_per_step"', 'LeftOut("perf/time_per_stp"'))
    result = run("list", "--unused", "--root", str(project))
    assert result.exit_code == 1
    assert "panels/verl_training.py" in result.output and "did you mean 'perf/time_per_step'" in result.output
