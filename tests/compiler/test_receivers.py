"""Receivers are checked at build (and so by check) against what Alertmanager 0.25 accepts, and no
receiver secret, in a field, a URL or a header, reaches rendered/."""

import pytest
import yaml

from conftest import run, tree_digest
from dashgen.compiler.alerting.receivers import BLOCKS, BOOL, COUNT, DURATION, HEADER, INTEGRATIONS, LIST, TEXT_LIST, TEXT_MAP, URL
from dashgen.promtool import run_tool

ALERTMANAGER_YML = "rendered/alertmanager/alertmanager.yml"


def build(project, tmp_path, command: str = "build", **fields):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(fields))
    return run(command, "--root", str(project), "--config", str(config))


def webhook(**fields) -> dict:
    return {"alertmanager": {"channel": {"webhook_configs": [{"url": "https://hooks.example.org/verl", **fields}]}}}


SECRETS = {
    "token in a webhook URL's query": (
        webhook(url="https://hooks.example.org/verl?token=s3cret"),
        "alertmanager.channel.webhook_configs[0].url: the URL has a query string"),
    "credentials in a proxy URL": (
        webhook(http_config={"proxy_url": "http://user:s3cret@proxy.example.org:3128"}),
        "alertmanager.channel.webhook_configs[0].http_config.proxy_url: the URL holds credentials"),
    "credentials in a webhook URL": (
        webhook(url="https://user:s3cret@hooks.example.org/verl"), "use http_config's basic_auth with password_file"),
    "msteams webhook_url (no msteams in 0.25)": (
        {"alertmanager": {"page": {"msteams_configs": [{"webhook_url": "https://x.webhook.office.com/s3cret"}]}}},
        "alertmanager.page: 'msteams_configs' is not an Alertmanager integration (version 0.25 knows"),
    "discord webhook_url": (
        {"alertmanager": {"page": {"discord_configs": [{"webhook_url": "https://discord.com/api/webhooks/1/s3cret"}]}}},
        "discord_configs[0].webhook_url would put a secret into rendered/"),
    "a proxy header": (
        webhook(http_config={"proxy_connect_header": {"Proxy-Authorization": ["Bearer s3cret"]}}),
        "http_config.proxy_connect_header would put a secret into rendered/"),
    "a bearer token": (webhook(http_config={"bearer_token": "s3cret"}), "use bearer_token_file"),
    "an oauth2 client secret": (
        webhook(http_config={"oauth2": {"client_id": "x", "client_secret": "s3cret", "token_url": "https://t/"}}),
        "http_config.oauth2.client_secret would put a secret into rendered/, which is committed; use "
        "client_secret_file"),
}

BROKEN = {
    "not a URL": (webhook(url="not a url"), "webhook_configs[0].url: 'not a url' is not an http:// or https:// URL"),
    "an unknown integration": ({"alertmanager": {"page": {"pager_configs": [{"key": "x"}]}}},
                               "'pager_configs' is not an Alertmanager integration"),
    "send_resolved as a string": (webhook(send_resolved="yes"),
                                  "webhook_configs[0].send_resolved: expected true or false (unquoted), got the "
                                  "string 'yes'"),
    "an unknown field": (webhook(max_alert=3), "Alertmanager 0.25 has no field 'max_alert' here; it knows"),
    "a count as text": (webhook(max_alerts="ten"), "max_alerts: expected a whole number"),
    "a required field missing": ({"alertmanager": {"page": {"webhook_configs": [{"send_resolved": True}]}}},
                                 "webhook_configs[0]: url is missing"),
    "a nested block of the wrong type": (webhook(http_config={"tls_config": "insecure"}),
                                         "http_config.tls_config: expected a mapping of tls_config fields"),
}


@pytest.mark.parametrize("case", [*SECRETS, *BROKEN])
@pytest.mark.parametrize("command", ["build", "check"])
def test_secrets_and_broken_receivers_are_refused_naming_the_field(project, tmp_path, case, command):
    fields, expected = {**SECRETS, **BROKEN}[case]
    before = tree_digest(project / "rendered")
    result = build(project, tmp_path, command, **fields)
    assert result.exit_code == 1
    assert result.output.count("Error:") == 1 and expected in result.output, result.output
    assert tree_digest(project / "rendered") == before


def test_good_receivers_build_and_pass_amtool(project, tmp_path):
    fields = {"alertmanager": {
        "page": {"pagerduty_configs": [{"routing_key_file": "/etc/am/pd", "send_resolved": True}]},
        "channel": {"webhook_configs": [{
                  "url": "https://hooks.example.org/verl", "max_alerts": 5, "http_config": {
                      "authorization": {"credentials_file": "/etc/am/hook-token"},
                      "proxy_url": "http://proxy.example.org:3128", "tls_config": {"insecure_skip_verify": False}}}]}}}
    assert build(project, tmp_path, **fields).exit_code == 0
    check = run_tool("amtool", ["check-config", str(project / ALERTMANAGER_YML)])
    assert check.returncode == 0, check.stdout + check.stderr


SAMPLES = {URL: "https://example.org/", BOOL: True, COUNT: 1, DURATION: "1m", TEXT_MAP: {"a": "b"},
           TEXT_LIST: ["a"], LIST: [], HEADER: {"X-Example": ["x"]}}
# Text fields whose value amtool parses while decoding (a bad one would stop it before it looks at the rest).
PARSED_TEXT = {"min_version": "TLS12", "max_version": "TLS13", "smarthost": "smtp.example.org:25",
               "message_type": "text"}


def _sample(field: str, kind: str):
    if kind in BLOCKS:
        return {inner: _sample(inner, inner_kind) for inner, inner_kind in BLOCKS[kind].items()}
    return SAMPLES.get(kind, PARSED_TEXT.get(field, "x"))


@pytest.mark.parametrize("integration", sorted(INTEGRATIONS))
def test_the_table_matches_what_amtool_0_25_accepts(tmp_path, integration):
    """Every field the table knows, with a value of its kind, is a field of that type for amtool; an unknown
    one is not. (amtool may still refuse the combination, e.g. a key and its *_file together.)"""
    entry = {field: _sample(field, kind) for field, kind in INTEGRATIONS[integration].items()}
    # All known fields at once; then an unknown one alone (a nested block's own checks would stop amtool early).
    for fields, expect_unknown in ((entry, False), ({"no_such_field": "x"}, True)):
        config = tmp_path / "alertmanager.yml"
        config.write_text(yaml.safe_dump({"route": {"receiver": "r"},
                                          "receivers": [{"name": "r", integration: [fields]}]}))
        result = run_tool("amtool", ["check-config", str(config)])
        output = result.stdout + result.stderr
        assert ("not found in type" in output) == expect_unknown, output
        assert "cannot unmarshal" not in output, output
