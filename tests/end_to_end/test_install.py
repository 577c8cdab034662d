"""dashgen installs under its own distribution name, `dashgen-rl`: the bare name `dashgen` on PyPI is
an unrelated project, so no file suggests installing it, and the README's team install works as
written, from a clone and from a wheel, extras included."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from dashgen import DISTRIBUTION, __version__
from dashgen.errors import BuildError
from dashgen.replay import matplotlib_check

# An install command and what follows it up to the end of the shell command (`&&`, `;`, `|`, a
# comment, a closing backtick or quote of a Markdown or Python string around it).
INSTALL = re.compile(r"\b(?:pip3?|pipx|uv)\s+(?:install|add|download)\b([^\n`#;&|]*)")
REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def pyproject_name() -> str:
    return re.search(r'^name = "([^"]+)"$', (REPO / "pyproject.toml").read_text(), re.MULTILINE).group(1)


def installed_names(text: str) -> list[str]:
    """The distribution names the install commands in `text` ask for (paths and options left out)."""
    names = []
    for arguments in INSTALL.findall(text):
        for token in arguments.split():
            token = token.strip("'\"")
            if token.startswith("-") or "/" in token:
                continue
            name = REQUIREMENT_NAME.match(token)
            if name:
                names.append(re.sub(r"[-_.]+", "-", name.group()).lower())
    return names


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    return [REPO / name for name in listed if (REPO / name).is_file()]


def test_the_detector_sees_the_bare_name_in_its_spellings():
    bare = "dash" + "gen"
    for text in (f"pip install {bare}", f"pip install '{bare}[plot]'", f"python -m pip install -U {bare}==0.3",
                 f"`uv add {bare.upper()}`", f'"install it with: pip install {bare}[plot]"'):
        assert bare in installed_names(text), text
    for text in ("pip install '.[plot]'", "pip install ./dashgen", f"pip install '{DISTRIBUTION}[plot]'",
                 "pip install 'dist/dashgen_rl-0.1.0-py3-none-any.whl[plot]' && dashgen init x",
                 "pip install matplotlib  # for dashgen preview"):
        assert bare not in installed_names(text), text


def test_no_file_suggests_installing_the_bare_name():
    offenders = []
    for path in tracked_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if "dashgen" in installed_names(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_distribution_name_is_the_one_pyproject_builds():
    assert pyproject_name() == DISTRIBUTION != "dashgen"


def test_the_matplotlib_hint_names_the_distribution(monkeypatch):
    monkeypatch.setattr(matplotlib_check.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(BuildError) as error:
        matplotlib_check.require_matplotlib("dashgen preview")
    assert f"pip install '{pyproject_name()}[plot]'" in str(error.value)


def team_install_blocks() -> list[list[str]]:
    """The pip commands of each `sh` block in the README's team section that has any."""
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("\n## Use it in your team's project\n"):]
    section = section[:section.index("\n## ", 1)]
    blocks = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL):
        commands = [line.split("#")[0].strip() for line in block.splitlines() if line.startswith("pip ")]
        if commands:
            blocks.append(commands)
    return blocks


def fresh_venv(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, capture_output=True, timeout=300)
    return folder / "bin"


@pytest.mark.live  # pip fetches the dependencies from PyPI, as a team's install does
@pytest.mark.heavy
@pytest.mark.slow  # a fresh virtualenv and its dependencies
def test_the_readme_team_install_works_in_a_fresh_venv(tmp_path):
    blocks = team_install_blocks()
    assert len(blocks) == 2, blocks  # from the clone, and as a wheel
    clone = tmp_path / "clone"
    for path in tracked_files():
        target = clone / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    for number, commands in enumerate(blocks):
        bin_dir = fresh_venv(tmp_path / f"venv{number}")
        for command in commands:
            argv = shlex.split(command)
            done = subprocess.run([str(bin_dir / "python"), "-m", *argv], cwd=clone, env=env, capture_output=True,
                                  text=True, timeout=900)
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        shown = subprocess.run([str(bin_dir / "python"), "-m", "pip", "show", DISTRIBUTION], env=env,
                               capture_output=True, text=True)
        assert shown.returncode == 0 and f"Name: {DISTRIBUTION}" in shown.stdout, shown.stderr
        imported = subprocess.run([str(bin_dir / "python"), "-c", "import dashgen, dashgen_panels, matplotlib; "
                                   "print(dashgen.__file__)"], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert imported.returncode == 0, imported.stderr
        assert Path(imported.stdout.strip()).is_relative_to(tmp_path / f"venv{number}")  # installed, not the clone
        version = subprocess.run([str(bin_dir / "dashgen"), "--version"], env=env, capture_output=True, text=True)
        assert version.returncode == 0 and __version__ in version.stdout, version.stdout + version.stderr
        project = tmp_path / f"team{number}"
        initialised = subprocess.run([str(bin_dir / "dashgen"), "init", str(project)], env=env, capture_output=True,
                                     text=True, timeout=120)
        assert initialised.returncode == 0 and (project / "dashgen.yaml").is_file(), initialised.stderr
