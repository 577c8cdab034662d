"""Compiled Jinja templates (dashgen/compiler/output/rendering.py) are kept like .pyc: used when current, never stale."""

from __future__ import annotations

import sys
from pathlib import Path

from dashgen.compiler.output import rendering


def _render(monkeypatch, cache: Path, writes: bool) -> str:
    monkeypatch.setattr(rendering, "_template_cache", lambda: rendering._CompiledTemplates(cache))
    monkeypatch.setattr(sys, "dont_write_bytecode", not writes)
    return rendering.templates().get_template("provisioning-dashboards.yaml.j2").render(
        folder="verl", default_dashboards_path="/var/lib/grafana/dashboards")


def test_a_compiled_template_is_written_unless_python_writes_no_bytecode_and_renders_the_same(tmp_path, monkeypatch):
    cache = tmp_path / "__pycache__"
    fresh = _render(monkeypatch, cache, writes=False)
    assert not cache.exists()  # PYTHONDONTWRITEBYTECODE: nothing written
    assert _render(monkeypatch, cache, writes=True) == fresh
    [compiled] = cache.iterdir()
    assert compiled.name.endswith(".jinja") and compiled.stat().st_size > 0
    assert _render(monkeypatch, cache, writes=False) == fresh  # read back


def test_a_compiled_file_of_other_source_is_not_used(tmp_path, monkeypatch):
    cache = tmp_path / "__pycache__"
    fresh = _render(monkeypatch, cache, writes=True)
    [compiled] = cache.iterdir()
    compiled.write_bytes(compiled.read_bytes()[:40] + b"garbage")  # wrong checksum and code
    assert _render(monkeypatch, cache, writes=False) == fresh


def test_a_read_only_folder_only_costs_the_compiling(tmp_path, monkeypatch):
    cache = tmp_path / "file-not-folder"
    cache.write_text("")
    assert _render(monkeypatch, cache, writes=True)
