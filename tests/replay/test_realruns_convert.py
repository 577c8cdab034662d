"""bench/realruns/convert.py's parsers on small inputs: what each reads from a raw log and how its
columns become verl keys."""

import importlib.util

from conftest import REPO

_spec = importlib.util.spec_from_file_location("realruns_convert", REPO / "bench/realruns/convert.py")
convert = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(convert)

AUTHORS_CSV = (
    "update,reward_mean,reward_std,loss,entropy,grad_norm,grad_norm_available,kl,kl_reason,"
    "truncation_rate,zero_advantage_fraction\n"
    "1,0.36875,0.43,-0.0306,0.294,0.5547,True,,beta=0.0; no reference model,0.0,0.25\n"
    "2,0.584375,0.47,-0.1859,0.198,nan,True,,beta=0.0; no reference model,0.0625,0.5\n"
    "3,0.4,0.46,0.0169,0.256,0.4521,True,,beta=0.0; no reference model,0.125,0.0\n"
)
RENAMES = {"reward_mean": "reward", "truncation_rate": "completions/clipped_ratio",
           "zero_advantage_fraction": "frac_reward_zero_std"}


def test_an_authors_csv_is_read_per_row_under_the_trl_keys_its_columns_rename_to():
    rows = convert.parse_trl_metrics_csv(AUTHORS_CSV, {"step_column": "update", "columns": RENAMES})
    assert sorted(rows) == [1, 2, 3]
    assert rows[2] == {
        "critic/score/mean": 0.584375, "critic/score/std": 0.47, "actor/pg_loss": -0.1859,
        "actor/entropy": 0.198, "actor/grad_norm": rows[2]["actor/grad_norm"],
        "response_length/clip_ratio": 0.0625, "frac_reward_zero_std": 0.5,
    }
    assert rows[2]["actor/grad_norm"] != rows[2]["actor/grad_norm"]  # nan stays nan until render
    assert '"actor/grad_norm": null' in convert.render(rows).splitlines()[1]


def test_an_authors_csv_keeps_only_the_steps_run_yaml_selects():
    rows = convert.parse_trl_metrics_csv(
        AUTHORS_CSV, {"step_column": "update", "columns": RENAMES, "first_kept_step": 2})
    assert sorted(rows) == [2, 3]
    assert rows[3]["actor/grad_norm"] == 0.4521
