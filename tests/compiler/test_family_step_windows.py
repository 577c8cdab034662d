"""A labelled family's step windows (verl_val_core, one series per validation metric): read from
the exporter's statistics of each member where the source computes them, else compiled to PromQL."""

from pathlib import Path

import pytest
import yaml

from conftest import REPO
from dashgen.compiler.rules.rule_files import compile_rules
from dashgen.compiler.output.targets.prometheus import rule_file_texts
from dashgen.config import Config
from dashgen.project_metrics import project_catalog


def validation_recordings(config: Config) -> dict[str, str]:
    files = compile_rules(REPO, config, project_catalog(REPO)).files
    texts = rule_file_texts([f for f in files if Path(f.path).name == "validation.yaml"], config)
    (text,) = texts.values()
    return {rule["record"]: rule["expr"] for group in yaml.safe_load(text)["groups"] for rule in group["rules"]
            if "record" in rule}


@pytest.mark.parametrize("exporter", [True, False])
def test_the_validation_familys_step_windows_are_the_exporters_unless_it_computes_none(exporter: bool):
    recorded = validation_recordings(Config(exporter_step_windows=exporter))
    peak, level = recorded["verl:val_core:max_80steps"], recorded["verl:val_core:baseline_ceiling_300steps"]
    if exporter:
        # Its labels but series and statistic kept: each member's, with data_source, variable and metric.
        assert peak == ('max without(series, statistic) (verl_step_statistic{job="verl", series="verl_val_core", '
                        'statistic="max_80steps"})')
        assert 'statistic="max_300steps_of_median_100steps"' in level
        assert not any("by_band" in name or "step_band" in expr for name, expr in recorded.items())
    else:
        assert "verl:val_core:by_band" in recorded and "verl_step_statistic" not in peak + level
        assert "max_over_time(verl_val_core{" in peak and "verl:run:step_band" in peak
