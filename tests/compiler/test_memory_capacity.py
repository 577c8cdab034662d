"""The card's size for VerlGPUMemoryPressure, from DCGM (alerts/memory.py), in the real promtool."""

import pytest
import yaml

from dashgen.compiler.output.build import render_project
from dashgen.config import Config
from dashgen.promtool import run_promtool

pytestmark = pytest.mark.heavy

RUN = 'job="verl",instance="t:9464",project="gsm8k",experiment="grpo"'


def test_with_dcgm_the_card_size_is_the_smallest_card_dcgm_reports(project, tmp_path):
    rules = render_project(project, Config(gpu_source="dcgm")).files["rules/memory.yaml"]
    (tmp_path / "memory.yaml").write_text(rules)
    gpu = 'job="dcgm",instance="n1:9400",Hostname="n1"'
    fixture = {
        "rule_files": ["memory.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                # An 80 GB card (81559 MiB) and a 141 GB one (143771 MiB): DCGM's series name no run.
                {"series": f'DCGM_FI_DEV_FB_USED{{{gpu},gpu="0"}}', "values": "40000x5"},
                {"series": f'DCGM_FI_DEV_FB_FREE{{{gpu},gpu="0"}}', "values": "41559x5"},
                {"series": f'DCGM_FI_DEV_FB_USED{{{gpu},gpu="1"}}', "values": "40000x5"},
                {"series": f'DCGM_FI_DEV_FB_FREE{{{gpu},gpu="1"}}', "values": "103771x5"},
                {"series": f"verl_perf_max_memory_reserved_bytes{{{RUN}}}", "values": "1e10x5"},
            ],
            "promql_expr_test": [{
                "expr": "run:gpu_memory_capacity_bytes:min", "eval_time": "2m",
                "exp_samples": [{"labels": 'run:gpu_memory_capacity_bytes:min{project="gsm8k",experiment="grpo"}',
                                 "value": 81559 * 2**20}],
            }],
        }],
    }
    (tmp_path / "memory-test.yaml").write_text(yaml.safe_dump(fixture))
    result = run_promtool(["test", "rules", "memory-test.yaml"], cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
