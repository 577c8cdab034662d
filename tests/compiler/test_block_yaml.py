"""dashgen.compiler.output.block_yaml writes rule files byte for byte as PyYAML does, or lets PyYAML write them."""

import random
from pathlib import Path

import pytest
import yaml

from dashgen.compiler.output import block_yaml
from dashgen.compiler.output.block_yaml import indented_yaml, pyyaml_indented_yaml, pyyaml_rule_yaml, rule_yaml, value_is_supported

REPO = Path(__file__).resolve().parents[2]
# The characters YAML gives a meaning to, besides letters and a space; a tab and a non-ASCII one.
SPECIAL = list("-?:#,[]{}&*!|>'\"%@`.\n ") + ["\t", "é", "0", "1", "e", "~"]
WORDS = ["yes", "no", "on", "null", "true", "1.5", "0x1f", "12:30", "2026-01-01", "~", "---", "...", "a b", "x"]


def random_text(rng: random.Random) -> str:
    parts = [rng.choice(SPECIAL + WORDS + ["expr", "sum(rate(x[5m]))"]) for _ in range(rng.randint(0, 6))]
    return "".join(parts)


def written_here(rng: random.Random, one_line: bool = False, key: bool = False):
    """A random string (or now and then a number or boolean) that rule_yaml writes itself."""
    if not key and rng.random() < 0.1:
        return rng.choice([0, 7, -3, 10**12, True, False])
    while True:
        text = random_text(rng)
        if value_is_supported(text) and not (one_line and "\n" in text):
            return text


def random_rules(rng: random.Random, one_line: bool = False) -> dict:
    def value():
        return written_here(rng, one_line)

    def rule() -> dict:
        keys = [written_here(rng, one_line=True, key=True) for _ in range(3)] + ["labels"]
        return {key: ({written_here(rng, one_line=True, key=True): value() for _ in range(2)} if key == "labels" else value())
                for key in keys}

    return {"groups": [{"name": value(), "rules": [rule() for _ in range(3)], "tags": [value() for _ in range(2)]}]}


@pytest.fixture
def no_fallback(monkeypatch):
    def fail(data):
        raise AssertionError("handed to PyYAML")

    monkeypatch.setattr(block_yaml, "pyyaml_rule_yaml", fail)
    monkeypatch.setattr(block_yaml, "pyyaml_indented_yaml", fail)


def test_the_projects_rule_files_are_written_without_pyyaml_and_read_the_same(no_fallback):
    datas = [yaml.safe_load(path.read_text()) for path in sorted((REPO / "rendered/rules").glob("*.yaml"))]
    expected = [pyyaml_rule_yaml(data) for data in datas]
    assert [rule_yaml(data) for data in datas] == expected


def test_the_projects_alertmanager_file_is_written_without_pyyaml_and_reads_the_same(no_fallback):
    data = yaml.safe_load((REPO / "rendered/alertmanager/alertmanager.yml").read_text())
    assert indented_yaml(data) == pyyaml_indented_yaml(data)


@pytest.mark.parametrize("seed", range(20))
def test_generated_rules_with_special_characters_come_out_as_pyyaml_writes_them(seed, no_fallback):
    rng = random.Random(seed)
    for _ in range(25):
        data = random_rules(rng)
        assert rule_yaml(data) == pyyaml_rule_yaml(data), data


@pytest.mark.parametrize("seed", range(10))
def test_generated_files_with_lists_indented_come_out_as_pyyaml_writes_them(seed, no_fallback):
    rng = random.Random(seed)
    for _ in range(25):
        data = random_rules(rng, one_line=True)  # the indented style writes no literal blocks
        assert indented_yaml(data) == pyyaml_indented_yaml(data), data


@pytest.mark.parametrize("seed", range(4))
def test_any_string_comes_out_as_pyyaml_writes_it(seed):
    rng = random.Random(seed)
    for _ in range(250):
        data = {"rules": [{"expr": random_text(rng)}, random_text(rng)]}
        assert rule_yaml(data) == pyyaml_rule_yaml(data), data


@pytest.mark.parametrize("text, written_here", [
    ("sum(rate(x[5m]))", True),
    ("a: b", True),  # single-quoted
    ("it's", True),
    ("line one\n  line two", True),  # a literal block
    ("", False),  # PyYAML: ''
    ("trailing\n", False),  # needs the chomping hint |
    (" leading\nbreak", False),  # needs an indentation hint
    ("caf\u00e9", False),
    ("x" * 2000, False),  # PyYAML folds it
])
def test_what_is_left_to_pyyaml(text, written_here):
    assert value_is_supported(text) is written_here
    data = {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": text}]}]}
    assert rule_yaml(data) == pyyaml_rule_yaml(data)


def test_other_types_and_empty_collections_are_left_to_pyyaml():
    for data in ({"a": 1}, {"a": None}, {"a": True}, {"a": 1.5}, {"a": {}}, {"a": []}, {"a": [[1]]}, {},
                 {"a": ["x\ny"]}, {"a": [{"b": [1, False]}]}):
        assert rule_yaml(data) == pyyaml_rule_yaml(data)
        assert indented_yaml(data) == pyyaml_indented_yaml(data)
