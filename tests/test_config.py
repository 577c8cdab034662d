"""The config as a typed schema: every field checked at load, errors naming the field and the file,
found at the project root by every command, printed by `dashgen config`."""

import dataclasses
import typing

import pytest
import yaml

from dashgen.config import CONFIG_FILE_NAME, Config, ConfigError, _schema, load_config
from conftest import run, tree_digest


def write_config(project, text: str):
    path = project / CONFIG_FILE_NAME
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, expected", [
    ('kl_spike_threshold: "0 or vector(1)"\n', "kl_spike_threshold: expected a number, got the string '0 or vector(1)'"),
    ("gpu_memory_bytes: -1\n", "gpu_memory_bytes: -1 bytes must be at least 1 byte"),
    ("gpu_memory_bytes: 80 apples\n", "gpu_memory_bytes: '80 apples' is not a size"),
    ("truncation_threshold: 1.5\n", "truncation_threshold: 1.5 must be at most 1"),
    ("truncation_threshold: .nan\n", "truncation_threshold: expected a finite number"),
    ("divergence_kl_factor: 0\n", "divergence_kl_factor: 0.0 must be greater than 0"),
    ("kl_spike_for: 10 minutes\n", "kl_spike_for: '10 minutes' is not a Prometheus duration"),
    ("rule_interval: 0s\n", "rule_interval: '0s' must be longer than 0s"),
    ("scrape_interval: 15\n", "scrape_interval: expected a string, got an integer 15"),
    ("gpu_source: nvidia\n", "gpu_source: 'nvidia' is not one of 'ray', 'dcgm'"),
    ("verl_job: [a, b]\n", "verl_job: expected a string, got a list"),
    ('verl_job: \'a"b\'\n', "verl_job: 'a\"b' is not valid here"),
    ('exporter_address: "localhost:9464\\"]\\n  - job_name: evil"\n', "exporter_address:"),
    ('datasource_name: "Prometheus\\nurl: http://evil"\n', "datasource_name: 'Prometheus\\nurl: http://evil' holds a control"),
    ("exporter_address: localhost:99999\n", "exporter_address: 'localhost:99999' is not host:port"),
    ("baseline_hold_step: 30s\n", "baseline_hold_step = '30s' must lie between rule_interval (1m)"),
    ("baseline_hold_step: 2d\n", "and baseline_hold_window (24h)"),
    ("kl_spike_treshold: 0.2\n", "unknown config field 'kl_spike_treshold'; did you mean 'kl_spike_threshold'?"),
    ("kl_spike_threshold: 0.2\nkl_spike_threshold: 0.3\n", "field 'kl_spike_threshold' is given twice"),
    ("- a\n- b\n", "config must be a mapping of field: value"),
    ("a: [\n", "not valid YAML"),
])
def test_a_bad_value_names_the_field_and_the_file(project, text, expected):
    path = write_config(project, text)
    before = tree_digest(project / "rendered")
    result = run("build", "--root", str(project))  # dashgen.yaml is found without --config
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {path}: ") and expected in result.output, result.output
    assert "Traceback" not in result.output
    assert tree_digest(project / "rendered") == before


def test_a_config_that_is_not_utf8_is_named(project):
    path = project / CONFIG_FILE_NAME
    path.write_bytes("datasource_name: Prométheus\n".encode("latin-1"))
    result = run("check", "--root", str(project))
    assert result.exit_code == 1
    assert f"{path}: config is not UTF-8 text (byte 0xe9 at offset 21)" in result.output


def test_every_field_is_type_checked_from_its_annotation():
    """Also the fields added later: the schema comes from the annotations, not from a list here."""
    for f, hint in _schema().items():
        with pytest.raises(ConfigError, match=rf"^{f.name}(\['not'\])?: "):  # a mapping's field names the key
            Config(**{f.name: {"not": "a value of any field"}})
        base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
        if base in (int, float):
            with pytest.raises(ConfigError, match=f"^{f.name}: (expected|'0 or vector)"):
                Config(**{f.name: "0 or vector(1)"})


def test_durations_are_a_type_not_a_name_suffix():
    hints = {f.name: hint for f, hint in _schema().items()}
    durations = {name for name, hint in hints.items() if "PrometheusDuration" in repr(hint)}
    assert {"kl_spike_for", "rule_interval", "divergence_baseline_window", "stall_min_silence",
            "dashboard_refresh"} <= durations
    for name in durations:
        with pytest.raises(ConfigError, match=f"^{name}: '1 minute' is not a Prometheus duration"):
            Config(**{name: "1 minute"})


def test_units_are_parsed_and_normalised():
    assert Config(gpu_memory_bytes="40GiB").gpu_memory_bytes == 40 * 2**30
    assert Config(gpu_memory_bytes="40 GB").gpu_memory_bytes == 40 * 10**9
    assert Config(kl_spike_threshold=1).kl_spike_threshold == 1.0
    assert isinstance(Config(kl_spike_threshold=1).kl_spike_threshold, float)


def test_project_config_is_found_by_every_command(project, tmp_path):
    write_config(project, "verl_job: trainer\ngpu_memory_bytes: 40GiB\n")
    assert run("build", "--root", str(project)).exit_code == 0
    rules = (project / "rendered" / "rules" / "progress.yaml").read_text()
    assert 'job="trainer"' in rules
    assert str(40 * 2**30) in (project / "rendered" / "rules" / "memory.yaml").read_text()
    assert run("check", "--root", str(project)).exit_code == 0
    listed = run("list", "--root", str(project))
    assert listed.exit_code == 0 and "VerlKLSpike" in listed.output
    # --config still wins over the project's file.
    other = tmp_path / "other.yaml"
    other.write_text("verl_job: other\n")
    result = run("check", "--root", str(project), "--config", str(other))
    assert result.exit_code == 1 and "does not match the sources" in result.output


def test_dashgen_config_prints_the_effective_config(project):
    path = write_config(project, "kl_spike_threshold: 0.2\ndatasource_name: 'Prom: main, #1'\n")
    result = run("config", "--root", str(project))
    assert result.exit_code == 0, result.output
    assert f"overridden by {path}" in result.output
    assert "kl_spike_threshold: 0.2  # from dashgen.yaml" in result.output
    assert "rule_interval: 1m\n" in result.output
    printed = yaml.safe_load(result.output)
    assert Config(**printed) == load_config(None, project)
    assert set(printed) == {f.name for f in dataclasses.fields(Config)}
