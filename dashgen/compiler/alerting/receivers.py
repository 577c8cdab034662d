"""Receivers as Alertmanager 0.25 reads them, checked at build: no secret in rendered/, nothing it refuses.

The rendered alertmanager.yml is committed, so a receiver secret (a key, a password, a token in a
URL) must stay out of it: Alertmanager reads those from `*_file` fields, and where 0.25 has no file
variant the build says so. Every integration, field and value type below is what Alertmanager 0.25
(Debian bookworm's package) accepts; `amtool check-config` of that version agrees with this table
(tests/compiler/test_receivers.py runs it), so a bad receiver fails `build` and `check` naming its field,
not only `lint` with amtool's message.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from dashgen.errors import BuildError

ALERTMANAGER_VERSION = "0.25"

# Value kinds. TEXT is any scalar but a boolean; URL an http(s) URL Alertmanager connects to.
TEXT, BOOL, URL, COUNT, DURATION, TEXT_MAP, TEXT_LIST, LIST = (
    "text", "bool", "url", "count", "duration", "text_map", "text_list", "list")
# Nested blocks, checked against their own tables.
HTTP, TLS, BASIC_AUTH, AUTHORIZATION, OAUTH2, SIGV4, HEADER = (
    "http_config", "tls_config", "basic_auth", "authorization", "oauth2", "sigv4", "header")

_COMMON = {"send_resolved": BOOL}

INTEGRATIONS: dict[str, dict[str, str]] = {
    "discord_configs": {**_COMMON, "http_config": HTTP, "webhook_url": URL, "title": TEXT, "message": TEXT},
    "email_configs": {**_COMMON, "to": TEXT, "from": TEXT, "hello": TEXT, "smarthost": TEXT, "auth_username": TEXT,
                      "auth_password": TEXT, "auth_password_file": TEXT, "auth_secret": TEXT, "auth_identity": TEXT,
                      "headers": TEXT_MAP, "html": TEXT, "text": TEXT, "require_tls": BOOL, "tls_config": TLS},
    "opsgenie_configs": {**_COMMON, "http_config": HTTP, "api_key": TEXT, "api_key_file": TEXT, "api_url": URL,
                         "message": TEXT, "description": TEXT, "source": TEXT, "details": TEXT_MAP, "entity": TEXT,
                         "responders": LIST, "actions": TEXT, "tags": TEXT, "note": TEXT, "priority": TEXT,
                         "update_alerts": BOOL},
    "pagerduty_configs": {**_COMMON, "http_config": HTTP, "service_key": TEXT, "service_key_file": TEXT,
                          "routing_key": TEXT, "routing_key_file": TEXT, "url": URL, "client": TEXT,
                          "client_url": TEXT, "description": TEXT, "details": TEXT_MAP, "images": LIST,
                          "links": LIST, "source": TEXT, "severity": TEXT, "class": TEXT, "component": TEXT,
                          "group": TEXT},
    "pushover_configs": {**_COMMON, "http_config": HTTP, "user_key": TEXT, "token": TEXT, "title": TEXT,
                         "message": TEXT, "url": TEXT, "url_title": TEXT, "sound": TEXT, "priority": TEXT,
                         "retry": DURATION, "expire": DURATION, "html": BOOL},
    "slack_configs": {**_COMMON, "http_config": HTTP, "api_url": URL, "api_url_file": TEXT, "channel": TEXT,
                      "username": TEXT, "color": TEXT, "title": TEXT, "title_link": TEXT, "pretext": TEXT,
                      "text": TEXT, "fields": LIST, "short_fields": BOOL, "footer": TEXT, "fallback": TEXT,
                      "callback_id": TEXT, "icon_emoji": TEXT, "icon_url": TEXT, "image_url": TEXT,
                      "thumb_url": TEXT, "link_names": BOOL, "mrkdwn_in": TEXT_LIST, "actions": LIST},
    "sns_configs": {**_COMMON, "http_config": HTTP, "api_url": TEXT, "sigv4": SIGV4, "topic_arn": TEXT,
                    "phone_number": TEXT, "target_arn": TEXT, "subject": TEXT, "message": TEXT,
                    "attributes": TEXT_MAP},
    "telegram_configs": {**_COMMON, "http_config": HTTP, "api_url": URL, "bot_token": TEXT, "chat_id": COUNT,
                         "message": TEXT, "disable_notifications": BOOL, "parse_mode": TEXT},
    "victorops_configs": {**_COMMON, "http_config": HTTP, "api_key": TEXT, "api_key_file": TEXT, "api_url": URL,
                          "routing_key": TEXT, "message_type": TEXT, "state_message": TEXT,
                          "entity_display_name": TEXT, "monitoring_tool": TEXT, "custom_fields": TEXT_MAP},
    "webex_configs": {**_COMMON, "http_config": HTTP, "api_url": URL, "message": TEXT, "room_id": TEXT},
    "webhook_configs": {**_COMMON, "http_config": HTTP, "url": URL, "max_alerts": COUNT},
    "wechat_configs": {**_COMMON, "http_config": HTTP, "api_secret": TEXT, "corp_id": TEXT, "api_url": URL,
                       "message": TEXT, "message_type": TEXT, "agent_id": TEXT, "to_user": TEXT, "to_party": TEXT,
                       "to_tag": TEXT},
}

BLOCKS: dict[str, dict[str, str]] = {
    HTTP: {"basic_auth": BASIC_AUTH, "authorization": AUTHORIZATION, "oauth2": OAUTH2, "bearer_token": TEXT,
           "bearer_token_file": TEXT, "proxy_url": URL, "proxy_connect_header": HEADER, "tls_config": TLS,
           "follow_redirects": BOOL, "enable_http2": BOOL},
    TLS: {"ca_file": TEXT, "cert_file": TEXT, "key_file": TEXT, "server_name": TEXT, "insecure_skip_verify": BOOL,
          "min_version": TEXT, "max_version": TEXT},
    BASIC_AUTH: {"username": TEXT, "password": TEXT, "password_file": TEXT},
    AUTHORIZATION: {"type": TEXT, "credentials": TEXT, "credentials_file": TEXT},
    OAUTH2: {"client_id": TEXT, "client_secret": TEXT, "client_secret_file": TEXT, "scopes": TEXT_LIST,
             "token_url": URL, "endpoint_params": TEXT_MAP, "tls_config": TLS, "proxy_url": URL},
    SIGV4: {"region": TEXT, "access_key": TEXT, "secret_key": TEXT, "profile": TEXT, "role_arn": TEXT},
}

# Fields required where Alertmanager has no global default for them.
REQUIRED = {"webhook_configs": ("url",), "email_configs": ("to",), "webex_configs": ("room_id",)}

# Fields holding a secret, by the block they are in, and the field 0.25 reads it from instead (None: none).
SECRETS: dict[str, dict[str, str | None]] = {
    "slack_configs": {"api_url": "api_url_file"},
    "pagerduty_configs": {"routing_key": "routing_key_file", "service_key": "service_key_file"},
    "email_configs": {"auth_password": "auth_password_file", "auth_secret": None},
    "opsgenie_configs": {"api_key": "api_key_file"},
    "victorops_configs": {"api_key": "api_key_file"},
    "pushover_configs": {"user_key": None, "token": None},
    "telegram_configs": {"bot_token": None},
    "discord_configs": {"webhook_url": None},
    "wechat_configs": {"api_secret": None},
    HTTP: {"bearer_token": "bearer_token_file", "proxy_connect_header": None},
    BASIC_AUTH: {"password": "password_file"},
    AUTHORIZATION: {"credentials": "credentials_file"},
    OAUTH2: {"client_secret": "client_secret_file"},
    SIGV4: {"secret_key": None},
}

_KIND_TEXT = {TEXT: "a string", BOOL: "true or false (unquoted)", URL: "an http:// or https:// URL",
              COUNT: "a whole number", DURATION: "a duration such as 1m", TEXT_MAP: "a mapping of strings",
              TEXT_LIST: "a list of strings", LIST: "a list", HEADER: "a mapping of header names to lists"}


def check_receiver(name: str, receiver: dict[str, Any]) -> None:
    """BuildError naming `config: <name>.<integration>[i].<field>` for what Alertmanager 0.25 would refuse,
    or for a secret that would be written into rendered/."""
    for integration, entries in receiver.items():  # the config's schema has checked: name -> list of mappings
        fields = INTEGRATIONS.get(integration)
        if fields is None:
            raise BuildError(f"config: {name}: {integration!r} is not an Alertmanager integration (version "
                             f"{ALERTMANAGER_VERSION} knows {', '.join(sorted(INTEGRATIONS))}); expected e.g. "
                             f"slack_configs: [{{api_url_file: /etc/alertmanager/slack-url, channel: '#verl'}}]")
        for index, entry in enumerate(entries):
            where = f"{name}.{integration}[{index}]"
            for field in REQUIRED.get(integration, ()):
                if field not in entry:
                    raise BuildError(f"config: {where}: {field} is missing; Alertmanager needs it")
            _check_block(where, integration, fields, entry)


def _check_block(where: str, block: str, fields: dict[str, str], values: dict[str, Any]) -> None:
    for field, value in values.items():
        path = f"{where}.{field}"
        kind = fields.get(field)
        if kind is None:
            close = ", ".join(sorted(fields))
            raise BuildError(f"config: {path}: Alertmanager {ALERTMANAGER_VERSION} has no field {field!r} here; "
                             f"it knows {close}")
        if field in SECRETS.get(block, {}):
            _refuse_secret(path, SECRETS[block][field])
        if kind in BLOCKS:
            if not isinstance(value, dict):
                raise BuildError(f"config: {path}: expected a mapping of {kind} fields, got {_describe(value)}")
            _check_block(path, kind, BLOCKS[kind], value)
        elif kind == URL:
            _check_url(path, value)
        elif not _fits(kind, value):
            raise BuildError(f"config: {path}: expected {_KIND_TEXT[kind]}, got {_describe(value)}")


def _refuse_secret(path: str, file_field: str | None) -> None:
    fix = (f"use {file_field} with the path of a file holding it" if file_field else
           f"Alertmanager {ALERTMANAGER_VERSION} cannot read it from a file; configure this receiver outside dashgen")
    raise BuildError(f"config: {path} would put a secret into rendered/, which is committed; {fix}")


def _check_url(path: str, value: Any) -> None:
    try:
        parts = urllib.parse.urlsplit(value) if isinstance(value, str) else None
        valid = parts is not None and parts.scheme in ("http", "https") and bool(parts.hostname)
        valid = valid and (parts.port or 0) >= 0
    except ValueError:  # an unclosed [IPv6 address, a port out of range
        valid = False
    if not valid:
        raise BuildError(f"config: {path}: {value!r} is not an http:// or https:// URL with a host")
    leak = url_secret(parts)
    if leak == CREDENTIALS:
        raise BuildError(f"config: {path}: the URL holds {leak}, which would go into "
                         f"rendered/, which is committed; use http_config's basic_auth with password_file")
    if leak:
        raise BuildError(f"config: {path}: the URL has {leak} and would go into "
                         f"rendered/, which is committed; send the token with http_config's authorization "
                         f"credentials_file, or configure this receiver outside dashgen "
                         f"(Alertmanager {ALERTMANAGER_VERSION} has no file variant of this URL)")


CREDENTIALS, QUERY = "credentials (user:password@)", "a query string, which may hold a token"


def url_secret(parts: urllib.parse.SplitResult) -> str | None:
    """What in a URL may be a secret (CREDENTIALS or QUERY), or None."""
    if parts.username is not None or parts.password is not None:
        return CREDENTIALS
    return QUERY if parts.query else None


def _fits(kind: str, value: Any) -> bool:
    if kind == TEXT:
        return isinstance(value, (str, int, float)) and not isinstance(value, bool)
    if kind == BOOL:
        return isinstance(value, bool)
    if kind == COUNT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == DURATION:
        from dashgen.config import DURATION as DURATION_SYNTAX

        return isinstance(value, str) and DURATION_SYNTAX.fullmatch(value) is not None
    if kind == TEXT_MAP:
        return isinstance(value, dict) and all(isinstance(v, (str, int, float)) for v in value.values())
    if kind == TEXT_LIST:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, list)


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f"the string {value!r}"
    return {bool: "a boolean", dict: "a mapping", list: "a list"}.get(type(value), type(value).__name__)
