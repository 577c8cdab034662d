"""Reading a config file (dashgen.yaml, or `--config FILE`) into a Config."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from dashgen.bounded_read import TooLarge, parse_nested, read_bounded
from dashgen.config.checking import _schema, _type_name
from dashgen.config.fields import ConfigError
from dashgen.config.schema import Config, Section, _core_field_names
from dashgen.errors import get_close_matches

CONFIG_FILE_NAME = "dashgen.yaml"


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice (the second would silently win), and aliases: a
    few lines of nested aliases (an alias bomb) expand to billions of nodes, which the 1 MiB read
    limit does not bound, and a config has no need of them."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.events.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"the alias *{event.anchor} is not allowed here (nor merge keys <<: *...): write the "
                            f"value out", event.start_mark)
        return super().compose_node(parent, index)


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"field {key!r} is given twice",
                                                    key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def load_yaml(text: str) -> Any:
    """A user's YAML file (dashgen.yaml, metrics.yaml) as data: safe tags only, no key twice, no aliases."""
    return parse_nested(lambda each: yaml.load(each, Loader=_UniqueKeyLoader), text)


def config_path(root: Path | None, explicit: Path | None) -> Path | None:
    """The config file a command uses: `--config` if given, else the project's dashgen.yaml if any."""
    if explicit is not None:
        return explicit
    if root is not None and (root / CONFIG_FILE_NAME).is_file():
        return root / CONFIG_FILE_NAME
    return None


MAX_CONFIG_BYTES = 1 << 20


# Top-level fields of a dashgen.yaml older than the deploy targets' sections: the prefix a field
# had, and the section it is a field of now (`kubernetes_namespace` -> `kubernetes: {namespace}`).
MOVED_TO_SECTIONS = {"kubernetes_": "kubernetes", "alertmanager_": "alertmanager", "act_": "act"}
# `kubernetes: true` turned the Kubernetes target on; the name is the section's now.
MOVED_SWITCHES = {"kubernetes": "enabled"}


def moved_field_problem(key: str, value: Any) -> str | None:
    """Where a top-level field of an older dashgen.yaml is set now, if `key` is one; else None."""
    if key in MOVED_SWITCHES and not isinstance(value, dict):
        new = MOVED_SWITCHES[key]
        shown = {True: "true", False: "false"}.get(value, repr(value)) if isinstance(value, bool) else repr(value)
        return f"{key} is a section now: {key}: {shown} moved to {key}.{new}; write it as `{key}: {{{new}: {shown}}}`"
    for prefix, section in MOVED_TO_SECTIONS.items():
        if key.startswith(prefix):
            new = key[len(prefix):]
            return f"{key} moved to {section}.{new}: write it under `{section}:` as `{section}: {{{new}: ...}}`"
    return None


def read_overrides(path: Path, known_sections: Callable[[], Iterable[type[Section]]] | None = None
                   ) -> dict[str, Any]:
    """The field: value mapping of a config file; ConfigError naming the file and the field.

    `known_sections` lists the sections whose fields a top-level key is looked up in, to name a
    field's section when dashgen.yaml sets it at the top level; it is called only then."""
    try:
        raw = read_bounded(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    except TooLarge as exc:
        raise ConfigError(f"{path}: config is {exc}; is it the right file?") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: config is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                          f"save it as UTF-8") from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: config must be a mapping of field: value, not {_type_name(type(data))}")
    known = _core_field_names()
    for key in data:
        if not isinstance(key, str):
            raise ConfigError(f"{path}: config field {key!r} is not a name")
        moved = moved_field_problem(key, data[key])
        if moved:
            raise ConfigError(f"{path}: {moved}")
        if key in known and isinstance(data[key], dict):  # no core field takes a mapping: a section's
            raise ConfigError(f"{path}: {key}: a mapping, as a section or alert area takes, under the name of a "
                              f"core config field ({_type_name(_core_field_hint(key))}): a section or alert area "
                              f"cannot be named {key!r} (name it otherwise), and the field takes a value")
        if key in known or isinstance(data[key], dict):
            continue  # a field, or a section (checked once the sections are known)
        home = [s for s in (known_sections() if known_sections else ())
                if key in {f.name for f in dataclasses.fields(s)}]
        if home:
            raise ConfigError(f"{path}: {key} is a field of the {home[0].section!r} {home[0].kind} now: write it "
                              f"under `{home[0].section}:` (e.g. `{home[0].section}: {{{key}: {data[key]!r}}}`)")
        close = get_close_matches(key, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "; `dashgen config --describe` lists the fields"
        raise ConfigError(f"{path}: unknown config field {key!r}{hint}")
    return data


def load_config(path: Path | None, root: Path | None = None,
                known_sections: Callable[[], Iterable[type[Section]]] | None = None) -> Config:
    """Defaults, overridden by the config file `config_path(root, path)` finds, if any
    (`known_sections`: see read_overrides; dashgen.compiler.sections.load_config passes dashgen's own)."""
    found = config_path(root, path)
    if found is None:
        return Config()
    try:
        return config_from(read_overrides(found, known_sections), found)
    except ConfigError as exc:
        raise ConfigError(exc.message if exc.message.startswith(f"{found}: ") else f"{found}: {exc.message}") from None


def config_from(data: dict[str, Any], source: Path | None = None) -> Config:
    """A config from a mapping as dashgen.yaml holds it: top-level fields, and a section per alert
    area or deploy target (`{"rule_interval": "30s", "stability": {"kl_spike_threshold": 0.2}}`)."""
    for key, value in data.items():
        moved = moved_field_problem(key, value)
        if moved:
            raise ConfigError(moved)
    core = set(_core_field_names())
    config = Config(**{k: v for k, v in data.items() if k in core})
    object.__setattr__(config, "_sections", {k: v for k, v in data.items() if k not in core})
    object.__setattr__(config, "_source", source)
    return config


def _core_field_hint(name: str) -> Any:
    return next(hint for f, hint in _schema(Config).items() if f.name == name)
