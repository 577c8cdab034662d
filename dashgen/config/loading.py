"""Reading a config file (dashgen.yaml, or `--config FILE`) into a Config."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from dashgen.bounded_read import TooLarge, parse_nested, read_bounded
from dashgen.config.checking import _type_name
from dashgen.config.fields import ConfigError
from dashgen.config.schema import AreaConfig, Config, _core_field_names, areas_of
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


def read_overrides(path: Path) -> dict[str, Any]:
    """The field: value mapping of a config file; ConfigError naming the file and the field."""
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
        if key in known or isinstance(data[key], dict):
            continue  # a field, or an alert area's section (checked once the areas are loaded)
        home = [a.area for a in default_areas() if key in {f.name for f in dataclasses.fields(a)}]
        if home:
            raise ConfigError(f"{path}: {key} is a field of the {home[0]!r} alert area now: write it under "
                              f"`{home[0]}:` (e.g. `{home[0]}: {{{key}: {data[key]!r}}}`)")
        close = get_close_matches(key, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "; `dashgen config --describe` lists the fields"
        raise ConfigError(f"{path}: unknown config field {key!r}{hint}")
    return data


def load_config(path: Path | None, root: Path | None = None) -> Config:
    """Defaults, overridden by the config file `config_path(root, path)` finds, if any."""
    found = config_path(root, path)
    if found is None:
        return Config()
    try:
        return config_from(read_overrides(found), found)
    except ConfigError as exc:
        raise ConfigError(exc.message if exc.message.startswith(f"{found}: ") else f"{found}: {exc.message}") from None


def config_from(data: dict[str, Any], source: Path | None = None) -> Config:
    """A config from a mapping as dashgen.yaml holds it: top-level fields, and a section per alert
    area (`{"rule_interval": "30s", "stability": {"kl_spike_threshold": 0.2}}`)."""
    core = set(_core_field_names())
    config = Config(**{k: v for k, v in data.items() if k in core})
    object.__setattr__(config, "_sections", {k: v for k, v in data.items() if k not in core})
    object.__setattr__(config, "_source", source)
    return config


def default_areas() -> list[type[AreaConfig]]:
    """The alert areas of dashgen's default alerts (the installed dashgen_alerts package)."""
    import importlib
    import pkgutil

    import dashgen_alerts

    return areas_of(importlib.import_module(f"dashgen_alerts.{info.name}")
                    for info in pkgutil.iter_modules(dashgen_alerts.__path__) if not info.name.startswith("_"))


