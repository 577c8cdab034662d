"""Every relative link of README.md and docs/*.md leads to a file that exists and, where it names an
anchor, to a heading of that file (GitHub's anchors: lowercase, spaces to '-', punctuation dropped)."""

import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO

FENCE = re.compile(r"^\s*(```|~~~)")
# [text](target) and ![alt](target), the target up to a space (a title may follow) or the closing parenthesis.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def prose_lines(text: str):
    """(line number, line) outside fenced code blocks."""
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            yield number, line


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: its text without Markdown, lowercased, punctuation but '-' and '_'
    dropped, spaces turned into '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text, not its target
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in `path`, a repeated one suffixed -1, -2, ... as GitHub does."""
    seen: Counter[str] = Counter()
    found = set()
    for _, line in prose_lines(path.read_text()):
        match = HEADING.match(line)
        if match:
            base = github_anchor(match.group(2))
            found.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
    return found


def relative_links(path: Path):
    """(line number, target) of each link that is not a URL, outside code."""
    for number, line in prose_lines(path.read_text()):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                yield number, target


def broken_links(path: Path, root: Path = REPO) -> list[str]:
    problems = []
    for number, target in relative_links(path):
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(root)}:{number}: {target}"
        if not linked.exists():
            problems.append(f"{where}: no such file")
        elif fragment and (linked.suffix != ".md" or fragment not in anchors(linked)):
            problems.append(f"{where}: no heading #{fragment} in {linked.relative_to(root)}")
    return problems


def test_the_anchor_rule_is_githubs():
    assert github_anchor("From alert to action: Alertmanager and `dashgen act`") == \
        "from-alert-to-action-alertmanager-and-dashgen-act"
    assert github_anchor("verl's RL-Insight: `source: rl_insight`") == "verls-rl-insight-source-rl_insight"
    assert github_anchor("Point Grafana at rendered/") == "point-grafana-at-rendered"
    assert github_anchor("GPUs: per node, per run, at 1024 GPUs") == "gpus-per-node-per-run-at-1024-gpus"


def test_the_checker_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# A page\n\n## Its section: `one`\n\n## Its section: `one`\n")
    (tmp_path / "README.md").write_text(
        "# Top\n\n[ok](docs/page.md#its-section-one) [twice](docs/page.md#its-section-one-1) [self](#top)\n"
        "[gone](docs/nothing.md) [no heading](docs/page.md#its-section-two) [here](#bottom)\n"
        "`[in code](docs/nothing.md)` [web](https://example.org/x.md#y)\n\n```\n[fenced](docs/none.md)\n```\n")
    assert broken_links(tmp_path / "README.md", tmp_path) == [
        "README.md:4: docs/nothing.md: no such file",
        "README.md:4: docs/page.md#its-section-two: no heading #its-section-two in docs/page.md",
        "README.md:4: #bottom: no heading #bottom in README.md",
    ]


def test_the_docs_are_linked_from_the_readme():
    linked = {(REPO / target.partition("#")[0]).resolve() for _, target in relative_links(REPO / "README.md")}
    assert {page.resolve() for page in documents()[1:]} <= linked


@pytest.mark.parametrize("path", documents(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_leads_to_a_file_and_heading(path: Path):
    assert broken_links(path) == []
