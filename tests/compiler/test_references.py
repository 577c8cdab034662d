"""Every alert name and dashboard uid a definition refers to is checked at build, in whatever form
PromQL, a template variable or a link states it."""

import pytest

from dashgen.compiler.compiled import CompiledDashboard
from dashgen.compiler.queries.references import check_alertname_matchers, check_dashboard_links, resolve_dashboard_references
from dashgen.errors import BuildError
from dashgen.model import Dashboard, DashboardLink, Variable

KNOWN = ("VerlKLSpike", "VerlRewardCliff")

MISSPELT = {
    "double quotes": 'ALERTS{alertname="VerlKLSpik"}',
    "single quotes": "ALERTS{alertname='VerlKLSpik'}",
    "backticks": "ALERTS{alertname=`VerlKLSpik`}",
    "a negative matcher, which would exclude nothing": 'ALERTS{alertstate="firing", alertname!="VerlKLSpik"}',
    "a negative regex of names": 'ALERTS{alertname!~"VerlRewardCliff|VerlKLSpik"}',
    "a regex of names": "count(ALERTS{alertname=~'VerlKLSpik|VerlRewardCliff'})",
}


@pytest.mark.parametrize("expr", MISSPELT.values(), ids=MISSPELT.keys())
def test_a_misspelt_alert_name_is_refused_in_every_string_form_and_operator(expr):
    with pytest.raises(BuildError, match="here: 'VerlKLSpik' is not an alert defined in alerts/; did you mean "
                                         "'VerlKLSpike'"):
        check_alertname_matchers(expr, KNOWN, "here")


@pytest.mark.parametrize("expr", ['ALERTS{alertname!=""}', 'ALERTS{alertname=~"Verl.*"}',
                                  "ALERTS{alertname=`VerlKLSpike`}", "up{malertname='x'}"])
def test_any_alert_a_pattern_and_known_names_pass(expr):
    check_alertname_matchers(expr, KNOWN, "here")


def _dashboard(uid: str, **fields) -> Dashboard:
    return Dashboard(uid, uid.title(), (), **fields)


def test_a_template_variables_query_is_checked():
    variable = Variable("alert", "Alert", 'label_values(ALERTS{alertname=~"VerlKLSpik|VerlRewardCliff"}, alertname)')
    with pytest.raises(BuildError, match="board: variable 'alert': 'VerlKLSpik' is not an alert"):
        resolve_dashboard_references(_dashboard("a", variables=(variable,)), dict.fromkeys(KNOWN), "board")


def test_a_link_to_a_uid_no_dashboard_has_is_refused():
    linked = _dashboard("verl-training", links=(DashboardLink("Compare runs", "verl-compare-run"),))
    with pytest.raises(BuildError, match="panels/a.py: dashboard 'verl-training': link 'Compare runs' leads to uid "
                                         "'verl-compare-run', which no dashboard in panels/ has; did you mean "
                                         "'verl-compare-runs'"):
        check_dashboard_links([CompiledDashboard("panels/a.py", linked, {}),
                               CompiledDashboard("panels/b.py", _dashboard("verl-compare-runs"), {})])
    check_dashboard_links([CompiledDashboard("panels/a.py", linked, {}),
                           CompiledDashboard("panels/b.py", _dashboard("verl-compare-run"), {})])
