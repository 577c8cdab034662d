"""`dashgen review`: the alerts before and after a change, judged on the project's labelled runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from dashgen.cli.options import root_option
from dashgen.compiler.scaffold import LABELLED_RUNS_DIR
from dashgen.errors import BuildError


@click.command()
@click.argument("run_folders", metavar="[RUNS]...", nargs=-1,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--base", required=True, metavar="REV|FOLDER",
              help="What the working tree is compared with: a git revision of the checkout (HEAD, origin/main), "
                   "or a rendered folder (one holding rules/*.yaml).")
@click.option("--public-corpus", is_flag=True,
              help="Also review on dashgen's public corpus of real runs (shipped in the package).")
@click.option("--accept", is_flag=True, help="Exit 0 even when a run got worse (the change is meant).")
@click.option("--json", "as_json", is_flag=True, help="Print the review as JSON instead of Markdown.")
@root_option
def review(run_folders: tuple[Path, ...], base: str, public_corpus: bool, accept: bool, as_json: bool,
           root: Path) -> None:
    """Backtest the alerts at --base and in the working tree on labelled runs; print a Markdown report.

    RUNS: run folders, or folders of run folders (default: the project's runs/). Exits 1 when a
    healthy run newly gets a warning or critical, a degrading run newly gets a critical, or a
    failure is newly missed or caught later; --accept exits 0 anyway. Neither the working tree
    nor rendered/ is changed.
    """
    from dashgen.compiler.sections import load_config
    from dashgen.review.comparison import review as review_runs
    from dashgen.review.corpus import public_corpus as corpus_folder
    from dashgen.review.report import format_markdown, review_json
    from dashgen.review.revisions import compared_rules
    from dashgen.review.runs import find_runs
    from dashgen.sources.chosen import REPLAYED_SOURCE

    folders = list(run_folders)
    if not folders and not public_corpus:
        default = root / LABELLED_RUNS_DIR
        if not default.is_dir():
            raise BuildError(f"{default}: no such folder; add labelled runs there (see its README.md, written by "
                             f"`dashgen init`), give run folders, or --public-corpus")
        folders.append(default)
    if public_corpus:
        folders.append(corpus_folder())
    runs = find_runs(folders)
    config = load_config(None, root).with_source(REPLAYED_SOURCE.name)
    rules = compared_rules(root, base)
    result = review_runs(runs, rules.base, rules.head, root, config, rules.base_name, rules.head_name)
    click.echo(json.dumps(review_json(result), indent=2) if as_json else format_markdown(result), nl=as_json)
    if result.regressions and not accept:
        click.echo(f"dashgen review: {len(result.regressions)} run(s) got worse; --accept if the change is meant",
                   err=True)
        sys.exit(1)
