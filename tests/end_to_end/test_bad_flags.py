"""Bad flags and files named by flags: one `Error:` line and exit 1, never a traceback, and never
a read that grows without bound (run here under a memory limit, so a regression fails fast)."""

import resource
import subprocess
import sys

import pytest
import yaml

from conftest import REPO

pytestmark = pytest.mark.heavy

SAMPLE_RUN = REPO / "examples" / "runs" / "gsm8k" / "ppo-qwen-7b.jsonl"
MEMORY_LIMIT = 1 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def dashgen(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dashgen", *args], capture_output=True, text=True, timeout=120,
                          preexec_fn=_limit_memory, cwd=cwd, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("args, expected", [
    (["build", "--root", str(REPO), "--reload", "http://[::1"], "--reload 'http://[::1': expected Prometheus' base"),
    (["build", "--root", str(REPO), "--reload", "http://localhost:99999"], "expected Prometheus' base URL"),
    (["config", "--root", str(REPO), "--config", "/dev/zero"], "/dev/zero: config is larger than 1,048,576 bytes"),
    (["backfill", str(SAMPLE_RUN), "--root", str(REPO), "--tsdb", "/proc/x"],
     "--tsdb /proc/x: cannot create the folder"),
    (["backfill", str(SAMPLE_RUN), "--root", str(REPO), "--tsdb", "TSDB", "--instance", ""],
     "--instance '': give a label value"),
    (["backfill", str(SAMPLE_RUN), "--root", str(REPO), "--tsdb", "TSDB", "--project", " "],
     "--project ' ': give a label value"),
    (["export", "--root", str(REPO), "--jsonl", str(REPO / "bench/realruns/unsloth-llama31-8b-gsm8k-trainer-state/"
                                                      "trainer_state.json"), "--listen", "127.0.0.1:0"],
     "trainer_state.json: a TRL trainer state, not a step log: follow the log that "
     "dashgen.formats.trl_callback.StepLogCallback writes"),
    (["act", "--root", str(REPO), "--project", "p", "--experiment", "e", "--token-file", "/dev/zero",
      "--listen", "127.0.0.1:0"], "the act token file /dev/zero is larger than 4,096 bytes"),
    (["act", "--root", str(REPO), "--project", "p", "--experiment", "e", "--token-file", "TOKEN", "--audit-log",
      "/dev/zero", "--listen", "127.0.0.1:0"], "--audit-log /dev/zero: not a regular file"),
])
def test_bad_flags_are_one_error(tmp_path, args, expected):
    (tmp_path / "token").write_text("dashgen-test-token-0123456789abcdef\n")
    places = {"TSDB": str(tmp_path / "tsdb"), "TOKEN": str(tmp_path / "token")}
    args = [places.get(arg, arg) for arg in args]
    before = {p: p.read_bytes() for p in (REPO / "rendered").rglob("*") if p.is_file()}
    result = dashgen(*args, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert expected in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("Error:") == 1
    assert {p: p.read_bytes() for p in (REPO / "rendered").rglob("*") if p.is_file()} == before
    assert not (tmp_path / "tsdb").exists()


def test_an_address_with_a_port_out_of_range_names_the_field_and_the_range(tmp_path):
    config = tmp_path / "dashgen.yaml"
    config.write_text(yaml.safe_dump({"act": {"address": "127.0.0.1:99999"}}))
    result = dashgen("config", "--root", str(REPO), "--config", str(config))
    assert result.returncode == 1
    assert "act.address: '127.0.0.1:99999' is not host:port with a port from 1 to 65535" in result.stderr
