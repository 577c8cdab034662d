"""A config duration is typed: its text as written, its length, arithmetic on the length."""

import json

import pytest
import yaml

from dashgen.compiler.output.block_yaml import pyyaml_rule_yaml, rule_yaml
from dashgen.config import Config, ConfigError, PrometheusDuration, config_from


def test_a_duration_keeps_its_text_and_knows_its_length():
    held = PrometheusDuration("90s")
    assert str(held) == "90s" and f"[{held}]" == "[90s]" and repr(held) == "'90s'"
    assert held.seconds == 90 and PrometheusDuration("1s500ms").seconds == 1.5
    # Equal to its text, not to another spelling of its length: it stands wherever the text stood.
    assert held == "90s" and held != "1m30s" and hash(held) == hash("90s")


def test_arithmetic_is_on_the_length_and_writes_largest_units_first():
    hour, ninety = PrometheusDuration("1h"), PrometheusDuration("90s")
    assert hour + ninety == "1h1m30s" and isinstance(hour + ninety, PrometheusDuration)
    assert hour + "10m" == "1h10m"
    assert hour - ninety == "58m30s"
    assert 3 * hour == hour * 3 == "3h"
    assert hour / 2 == "30m" and hour / ninety == 40.0
    assert PrometheusDuration("250ms") * 6 == "1s500ms"
    assert ninety < hour and ninety <= "1m30s" and hour > "59m59s" and hour >= "60m"
    with pytest.raises(ValueError, match="cannot be negative"):
        ninety - hour
    with pytest.raises(TypeError):
        hour + 1
    with pytest.raises(ValueError, match="is not a Prometheus duration"):
        PrometheusDuration("10 minutes")


def test_a_duration_is_written_as_its_text_by_yaml_json_and_the_rule_writer():
    data = {"for": PrometheusDuration("90s"), "interval": PrometheusDuration("1h") + "30m"}
    assert yaml.safe_dump(data) == "for: 90s\ninterval: 1h30m\n"
    assert json.dumps(data) == '{"for": "90s", "interval": "1h30m"}'
    assert rule_yaml(data) == pyyaml_rule_yaml(data) == "for: 90s\ninterval: 1h30m\n"


def test_config_durations_are_typed_as_written():
    config = config_from({"rule_interval": "90s", "stability": {"divergence_for": "2m"}})
    assert isinstance(config.rule_interval, PrometheusDuration) and config.rule_interval == "90s"
    assert config.rule_interval + config.scrape_interval == "1m45s"
    assert isinstance(Config().baseline_window, PrometheusDuration)
    with pytest.raises(ConfigError, match="^scrape_interval: expected a string, got an integer 15"):
        Config(scrape_interval=15)
