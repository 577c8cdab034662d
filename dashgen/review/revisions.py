"""The two rule sets a review compares: the base (a git revision, or a rendered folder) and the
working tree. Each is compiled once, by the installed dashgen, in a process of its own, the two
side by side; a git revision is taken with `git archive` into a temporary folder, so neither the
working tree, its rendered/ nor the repository's worktrees change.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

from dashgen.bounded_read import TooLarge, read_bounded
from dashgen.compiler.compiled import RULES_DIR
from dashgen.errors import BuildError
from dashgen.parent_death import die_with_parent_hook
from dashgen.records import record
from dashgen.replay.backtest import RuleSet, load_rules
from dashgen.replay.work_dir import work_dir
from dashgen.review.compiled_rules import rule_set_from_json
from dashgen.sources.statistics_file import STEP_STATISTICS_FILE, load_statistics

STATISTICS_FILE = Path(STEP_STATISTICS_FILE)


@record
class ComparedRules:
    """The rules before and after, and what to call each in a report."""
    base: RuleSet
    head: RuleSet
    base_name: str
    head_name: str = "working tree"


def compared_rules(root: Path, base: str) -> ComparedRules:
    """The rules at `base` (a rendered folder, or a git revision of the checkout holding `root`) and in
    the working tree at `root`."""
    folder = Path(base)
    if folder.is_dir():
        return _against_rendered(root, folder)
    commit, prefix = _git_revision(root, base)
    with work_dir("review") as tmp:
        tree = tmp / "tree"
        _extract(root, commit, tree)
        base_root = tree / prefix
        if not base_root.is_dir():
            raise BuildError(f"--base {base}: the project folder {prefix} does not exist at that revision")
        base_rules, head_rules = _compile_side_by_side(base_root, root, f"--base {base}")
    return ComparedRules(base_rules, head_rules, base)


def _against_rendered(root: Path, folder: Path) -> ComparedRules:
    """A rendered folder holds rule files, whose alerts with hysteresis read their own ALERTS series;
    the backtest evaluates those without it, so the working tree's are read the same way."""
    files = {f"{RULES_DIR}/{path.name}": _rule_file_text(path, folder)
             for path in sorted((folder / RULES_DIR).glob("*.yaml"))}
    if not files:
        raise BuildError(f"--base {folder}: not a rendered folder (no {RULES_DIR}/*.yaml in it), nor a git revision")
    for name, text in files.items():  # one file at a time, so that the error names it
        try:
            load_rules({name: text})
        except (KeyError, TypeError, ValueError, AttributeError, yaml.YAMLError) as exc:
            raise BuildError(f"--base {folder / name}: not a Prometheus rule file as dashgen renders it: "
                             f"{type(exc).__name__}: {exc}") from None
    recordings, alerts = load_rules(files)
    statistics = folder / STATISTICS_FILE
    head = _compile(root, "the working tree's rules")
    head = dataclasses.replace(head, alerts=[dataclasses.replace(alert, condition="", sustain=None)
                                             for alert in head.alerts])
    return ComparedRules(RuleSet(recordings, alerts, load_statistics(statistics) if statistics.is_file() else None),
                         head, str(folder))


# A rendered rule file is tens of kilobytes; a base's file beyond this is no rule file dashgen wrote.
RULE_FILE_BYTES = 16 << 20


def _rule_file_text(path: Path, folder: Path) -> str:
    """A base's rule file as text; BuildError naming it when it is a folder, unreadable, binary or huge."""
    where = f"--base {folder}: {path.relative_to(folder)}"
    if not path.is_file():
        raise BuildError(f"{where}: not a file")
    try:
        return read_bounded(path, RULE_FILE_BYTES).decode()
    except TooLarge as exc:
        raise BuildError(f"{where}: {exc}; not a rule file dashgen renders") from None
    except UnicodeDecodeError:
        raise BuildError(f"{where}: not text (binary data)") from None
    except OSError as exc:
        raise BuildError(f"{where}: cannot be read: {exc.strerror or exc}") from None


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, check=False)
    except FileNotFoundError:
        raise BuildError("git: not found on PATH; give --base a rendered folder instead") from None


def _git_revision(root: Path, base: str) -> tuple[str, str]:
    """The commit `base` names, and the project's folder within the repository."""
    prefix = _git(root, "rev-parse", "--show-prefix")
    if prefix.returncode != 0:
        raise BuildError(f"--base {base}: {root.resolve()} is not in a git checkout, and {base} is not a rendered "
                         f"folder")
    commit = _git(root, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
    if commit.returncode != 0 or base.startswith("-"):
        raise BuildError(f"--base {base}: no such revision in the git checkout at {root.resolve()}, "
                         f"and no such folder")
    return commit.stdout.decode().strip(), prefix.stdout.decode().strip()


def _extract(root: Path, commit: str, into: Path) -> None:
    """The whole tree at `commit` into `into`. git archive run in a subfolder archives that subfolder
    only, so it runs at the repository's top level (the project's prefix is applied after)."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise BuildError(f"git rev-parse --show-toplevel: {top.stderr.decode(errors='replace').strip()}")
    archive = _git(Path(top.stdout.decode().strip()), "archive", "--format=tar", commit)
    if archive.returncode != 0:
        raise BuildError(f"git archive {commit}: {archive.stderr.decode(errors='replace').strip()}")
    into.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")


# A project compiles in well under a second; a definition module that never returns (a loop at import)
# is stopped after this, not waited on for good.
COMPILE_SECONDS = 300


def _compile_side_by_side(base_root: Path, head_root: Path, base_name: str) -> tuple[RuleSet, RuleSet]:
    base, head = _started(base_root), _started(head_root)
    with _stopped_on_exit(base, head):
        base_output = _output(base, f"{base_name}: the rules there")  # both end before either is judged
        head_output = _output(head, "the working tree's rules")
    return (_rule_set(base, base_output, f"{base_name}: the rules there do not build"),
            _rule_set(head, head_output, "the working tree's rules do not build"))


def _compile(root: Path, what: str) -> RuleSet:
    process = _started(root)
    with _stopped_on_exit(process):
        output = _output(process, what)
    return _rule_set(process, output, f"{what} do not build")


def _started(root: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-B", "-m", "dashgen.review.compiled_rules", str(root.resolve())],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=die_with_parent_hook())


def _output(process: subprocess.Popen, what: str) -> tuple[str, str]:
    try:
        return process.communicate(timeout=COMPILE_SECONDS)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{what} did not compile within {COMPILE_SECONDS} s (a definition module that never "
                         f"returns?); stopped") from None


@contextlib.contextmanager
def _stopped_on_exit(*processes: subprocess.Popen):
    """Every compile still running when the block is left (an error, a timeout, SIGINT or SIGTERM,
    which unwind as KeyboardInterrupt) is killed and reaped: none keeps running for good."""
    try:
        yield
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def _rule_set(process: subprocess.Popen, output: tuple[str, str], failure: str) -> RuleSet:
    if process.returncode != 0:
        raise BuildError(f"{failure}:\n{output[1].strip()}")
    return rule_set_from_json(output[0])
