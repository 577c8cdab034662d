"""The config as a typed schema: every field checked at load, errors naming the field and the file,
found at the project root by every command, printed by `dashgen config`."""

import dataclasses
import inspect
import re
import textwrap
import typing

import pytest
import yaml

from dashgen.compiler.sections import shipped_sections
from dashgen.config import (CONFIG_FILE_NAME, Config, ConfigError, _schema, config_from, duration_seconds,
                            format_duration, load_config)
from conftest import run, tree_digest


def write_config(project, text: str):
    path = project / CONFIG_FILE_NAME
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, expected", [
    ('stability:\n  kl_spike_threshold: "0 or vector(1)"\n',
     "stability.kl_spike_threshold: expected a number, got the string '0 or vector(1)'"),
    ("gpu_memory_bytes: -1\n", "gpu_memory_bytes: -1 bytes must be at least 1 byte"),
    ("gpu_memory_bytes: 80 apples\n", "gpu_memory_bytes: '80 apples' is not a size"),
    ("rollout:\n  truncation_threshold: 1.5\n", "rollout.truncation_threshold: 1.5 must be at most 1"),
    ("rollout: {truncation_threshold: .nan}\n", "rollout.truncation_threshold: expected a finite number"),
    ("stability: {divergence_kl_factor: 0}\n", "stability.divergence_kl_factor: 0.0 must be greater than 0"),
    ("stability: {divergence_for: 10 minutes}\n", "stability.divergence_for: '10 minutes' is not a Prometheus duration"),
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
    ("progress: {stall_longest_gap_window: 1h}\n",
     "progress.stall_longest_gap_window = '1h' must be longer than stall_step_time_window (2h)"),
    ("stability: {kl_spike_treshold: 0.2}\n",
     "stability: unknown field 'kl_spike_treshold'; did you mean 'kl_spike_threshold'?"),
    ("rule_intervall: 1m\n", "unknown config field 'rule_intervall'; did you mean 'rule_interval'?"),
    ("stabilty: {kl_spike_threshold: 0.2}\n", "unknown config field or area 'stabilty'; did you mean 'stability'?"),
    # A flat dashgen.yaml of before the areas: the error names each field's new place.
    ("kl_spike_threshold: 0.2\n", "kl_spike_threshold is a field of the 'stability' alert area now: write it under "
                                   "`stability:`"),
    # A flat field of a deploy target, before the targets had sections: its new place.
    ("kubernetes_namespace: ml\n", "kubernetes_namespace moved to kubernetes.namespace: write it under "
                                   "`kubernetes:` as `kubernetes: {namespace: ...}`"),
    ("kubernetes: true\n", "kubernetes: true moved to kubernetes.enabled; write it as `kubernetes: {enabled: true}`"),
    ("act_address: 0.0.0.0:9095\n", "act_address moved to act.address"),
    ("alertmanager_group_wait: 1m\n", "alertmanager_group_wait moved to alertmanager.group_wait"),
    ("kubernetes: {namespce: ml}\n", "kubernetes: unknown field 'namespce'; did you mean 'namespace'?"),
    # A field an area retired: what took its place, not a guess at a field of another meaning.
    ("rewards: {reward_stagnation_window: 30m}\n",
     "rewards: reward_stagnation_window is no longer a field: VerlRewardStagnation counts logged steps now: set "
     "reward_stagnation_steps"),
    # A factor renamed for what it multiplies: 9 meant 10x, and the same 9 under the new name is 9x.
    ("stability: {reference_kl_rise_factor: 9}\n",
     "stability: reference_kl_rise_factor is no longer a field: VerlReferenceKLBlowUp's rise is "
     "reference_kl_rise_multiple now, the multiple of the quiet level it names: the old factor 9 meant 10x, so write "
     "10 for it"),
    ("act: {command_timeout: 0s}\n", "act.command_timeout: '0s' must be longer than 0s"),
    ("rule_interval: 1m\nrule_interval: 2m\n", "field 'rule_interval' is given twice"),
    ("- a\n- b\n", "config must be a mapping of field: value"),
    ("a: [\n", "not valid YAML"),
    ("stability: " + "[" * 100_000 + "]" * 100_000 + "\n", "not valid YAML: nested deeper than the parser goes"),
    ("stability: {kl_spike_threshold: " + "9" * 5000 + "}\n",
     "not valid YAML: holds an integer of more than 4,300 digits"),
])
def test_a_bad_value_names_the_field_and_the_file(project, text, expected):
    path = write_config(project, text)
    before = tree_digest(project / "rendered")
    result = run("build", "--root", str(project))  # dashgen.yaml is found without --config
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {path}: ") and expected in result.output, result.output
    assert "Traceback" not in result.output
    assert tree_digest(project / "rendered") == before


# The 35 flat fields of the deploy targets before they became sections (dashgen 0.x's Config).
FLAT_TARGET_FIELDS = [
    "alertmanager_address", "alertmanager_group_wait", "alertmanager_group_interval", "alertmanager_repeat_interval",
    "alertmanager_page", "alertmanager_channel", "alertmanager_info_to_channel",
    "act_address", "act_token_file", "act_actions", "act_project", "act_experiment", "act_pid_file",
    "act_ray_dashboard_url", "act_ray_submission_id", "act_command", "act_command_timeout", "act_audit_log",
    "act_max_body_bytes",
    "kubernetes", "kubernetes_namespace", "kubernetes_labels", "kubernetes_name_prefix", "kubernetes_dashboard_label",
    "kubernetes_dashboard_label_value", "kubernetes_dashboard_folder_annotation", "kubernetes_exporter_monitor",
    "kubernetes_exporter_selector", "kubernetes_exporter_port", "kubernetes_ray_monitor", "kubernetes_ray_port",
    "kubernetes_alertmanager_page", "kubernetes_alertmanager_channel", "kubernetes_act_url",
    "kubernetes_act_token_secret",
]


@pytest.mark.parametrize("flat", FLAT_TARGET_FIELDS)
def test_each_flat_target_field_names_a_field_of_its_section(flat):
    """Every old flat field is refused, by config_from as by a file, naming a field its section has."""
    with pytest.raises(ConfigError) as refused:
        config_from({flat: False})
    section, field = re.search(r"moved to (\w+)\.(\w+)", refused.value.message).groups()
    cls = next(cls for cls in shipped_sections() if cls.section == section)
    assert field in {f.name for f in dataclasses.fields(cls)}
    assert flat not in {f.name for f in dataclasses.fields(Config)}


def test_a_section_sets_a_deploy_target(project):
    write_config(project, "kubernetes: {enabled: true, namespace: ml}\nalertmanager: {group_wait: 45s}\n")
    assert run("build", "--root", str(project)).exit_code == 0
    assert "group_wait: 45s" in (project / "rendered" / "alertmanager" / "alertmanager.yml").read_text()
    rules = (project / "rendered" / "kubernetes" / "prometheus-rules" / "stability.yaml").read_text()
    assert "namespace: ml\n" in rules


def test_a_config_that_is_not_utf8_is_named(project):
    path = project / CONFIG_FILE_NAME
    path.write_bytes("datasource_name: Prométheus\n".encode("latin-1"))
    result = run("check", "--root", str(project))
    assert result.exit_code == 1
    assert f"{path}: config is not UTF-8 text (byte 0xe9 at offset 21)" in result.output


CONFIG_CLASSES = [Config, *shipped_sections()]


@pytest.mark.parametrize("cls", CONFIG_CLASSES, ids=lambda c: c.__name__)
def test_every_field_is_type_checked_from_its_annotation(cls):
    """Also the fields added later: the schema comes from the annotations, not from a list here."""
    for f, hint in _schema(cls).items():
        with pytest.raises(ConfigError, match=rf"^{f.name}(\['not'\])?: "):  # a mapping's field names the key
            cls(**{f.name: {"not": "a value of any field"}})
        base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
        if base in (int, float):
            with pytest.raises(ConfigError, match=f"^{f.name}: (expected|'0 or vector)"):
                cls(**{f.name: "0 or vector(1)"})


def test_durations_are_a_type_not_a_name_suffix():
    durations = {(cls, name) for cls in CONFIG_CLASSES for name, hint in
                 ((f.name, hint) for f, hint in _schema(cls).items()) if "PrometheusDuration" in repr(hint)}
    assert {"divergence_for", "rule_interval", "token_runaway_window", "stall_min_silence",
            "dashboard_refresh"} <= {name for _, name in durations}
    for cls, name in durations:
        with pytest.raises(ConfigError, match=f"^{name}: '1 minute' is not a Prometheus duration"):
            cls(**{name: "1 minute"})


def test_units_are_parsed_and_normalised():
    stability = next(cls for cls in shipped_sections() if cls.section == "stability")
    assert Config(gpu_memory_bytes="40GiB").gpu_memory_bytes == 40 * 2**30
    assert Config(gpu_memory_bytes="40 GB").gpu_memory_bytes == 40 * 10**9
    assert stability(kl_spike_threshold=1).kl_spike_threshold == 1.0
    assert isinstance(stability(kl_spike_threshold=1).kl_spike_threshold, float)


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
    path = write_config(project, "stability:\n  kl_spike_threshold: 0.2\ndatasource_name: 'Prom: main, #1'\n")
    result = run("config", "--root", str(project))
    assert result.exit_code == 0, result.output
    assert f"overridden by {path}" in result.output
    assert "  kl_spike_threshold: 0.2  # from dashgen.yaml" in result.output
    assert "rule_interval: 1m\n" in result.output
    printed = yaml.safe_load(result.output)
    sections = {cls.section: cls for cls in shipped_sections()}
    core = {k: v for k, v in printed.items() if k not in sections}
    assert Config(**core) == load_config(None, project)
    assert set(core) == {f.name for f in dataclasses.fields(Config)}
    assert set(printed) - set(core) == set(sections) >= {"alertmanager", "act", "kubernetes", "stability"}
    assert printed["act"]["actions"] == {"VerlNaNMetrics": "log", "VerlTrainingDivergence": "log"}
    assert printed["stability"]["kl_spike_threshold"] == 0.2
    assert printed["stability"]["kl_spike_steps"] == 10


def test_a_team_config_tunes_an_area_and_the_rules_follow(project):
    write_config(project, "stability:\n  kl_spike_threshold: 0.25\n")
    assert run("build", "--root", str(project)).exit_code == 0
    assert "(verl:actor_ppo_kl:median_10steps_half_logged > 0.25)\n" in (project / "rendered" / "rules" / "stability.yaml").read_text()


def test_describe_lists_every_field_with_its_type_default_and_description(project):
    result = run("config", "--root", str(project), "--describe")
    assert result.exit_code == 0, result.output
    for cls in CONFIG_CLASSES:
        for f in dataclasses.fields(cls):
            entry = re.search(rf"^  {f.name}: (.+), default (.+)\n      (\S.*)$", result.output, re.MULTILINE)
            assert entry, f"{cls.__name__}.{f.name} is not described:\n{result.output}"
    assert re.search(r"^  kl_spike_threshold: a number \(>= 0\), default 0.1\n      VerlKLSpike", result.output,
                     re.MULTILINE)
    assert "stability: (StabilityConfig in alerts/stability.py)" in result.output


def _own_comment(source_lines: list[str], name: str) -> str:
    """The comment lines right above a field's line (up to a `# ---` heading) and the one at its end."""
    at = next(i for i, line in enumerate(source_lines) if re.match(rf"\s+{name}: ", line))
    above = []
    for line in reversed(source_lines[:at]):
        text = line.strip()
        if not text.startswith("#") or text.startswith("# ---"):
            break
        above.insert(0, text.lstrip("#").strip())
    end = re.search(r"  # (.*)$", source_lines[at])
    return " ".join(above + ([end.group(1)] if end else []))


def _described(output: str, name: str, section: str = "") -> str:
    """The description `--describe` prints for field `name` (of the section named, if any)."""
    if section:
        output = output[output.index(f"\n{section}: ("):]
    entry = re.search(rf"^  {name}: .*\n((?:      .*\n)*)", output, re.MULTILINE)
    assert entry, f"{name} is not listed"
    return " ".join(entry.group(1).split())


def test_every_field_is_described_by_its_own_comment_not_its_neighbours(project):
    result = run("config", "--root", str(project), "--describe")
    assert result.exit_code == 0, result.output
    for cls in CONFIG_CLASSES:
        source = inspect.getsource(cls).splitlines()
        for f in dataclasses.fields(cls):
            own = _own_comment(source, f.name)
            assert own, f"{cls.__name__}.{f.name} has no comment of its own"
            described = _described(result.output, f.name, "" if cls is Config else cls.section)
            assert described == " ".join(own.split()), f"{cls.__name__}.{f.name}"
    # Those that printed their neighbour's comment.
    assert _described(result.output, "ray_submission_id").startswith("The submission id of the Ray job")
    assert _described(result.output, "audit_log").startswith("The JSON-lines file")
    assert _described(result.output, "max_body_bytes").startswith("The largest request body")
    assert _described(result.output, "straggler_for").startswith("How long a straggler must persist")


def test_a_team_field_without_a_comment_borrows_none(project):
    (project / "alerts" / "team.py").write_text(textwrap.dedent('''\
        from dataclasses import dataclass

        from dashgen.config import AreaConfig, Factor
        from dashgen.model import RuleGroup


        @dataclass(frozen=True)
        class TeamConfig(AreaConfig, area="team"):
            # How far the reward may drop.
            reward_drop_factor: Factor = 0.5
            reward_floor: float = 0.1
            reward_ceiling: float = 0.9  # the highest reward a prompt can earn


        def rules(config):
            return RuleGroup("team", ())
        '''))
    result = run("config", "--root", str(project), "--describe")
    assert result.exit_code == 0, result.output
    assert _described(result.output, "reward_drop_factor") == "How far the reward may drop."
    assert _described(result.output, "reward_floor") == ""
    assert _described(result.output, "reward_ceiling") == "the highest reward a prompt can earn"


def test_describe_works_without_a_project(tmp_path):
    """For people with only the installed package: dashgen's default areas."""
    result = run("config", "--root", str(tmp_path), "--describe")
    assert result.exit_code == 0 and "divergence_kl_factor: a number (> 0), default 4.0" in result.output


@pytest.mark.parametrize("text", ["75s", "1h10m", "1500ms", "2s250ms", "1d", "0s"])
def test_a_derived_window_is_written_as_a_duration_prometheus_reads(text):
    """Sub-second windows (a live test's config) keep their milliseconds, not `0.5s`."""
    assert duration_seconds(format_duration(duration_seconds(text))) == duration_seconds(text)
    assert format_duration(1.5) == "1s500ms" and format_duration(4200) == "1h10m"


def test_config_field_types_are_read_as_typing_reads_them():
    """checking.type_hints compiles each annotation's text once per process instead of once per class;
    for Config (annotations as text) and every shipped section it gives what typing.get_type_hints gives."""
    from dashgen.config.checking import type_hints

    assert all(isinstance(value, str) for value in Config.__annotations__.values())
    for cls in (Config, *shipped_sections()):
        assert type_hints(cls) == typing.get_type_hints(cls, include_extras=True), cls.__qualname__
