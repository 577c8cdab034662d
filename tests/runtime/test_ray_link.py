"""`dashgen export` links the run to its Ray session: the series GPU panels and alerts join on."""

import os

import pytest

from dashgen.replay.prometheus_server import stop_process
from support import start_exporter
from test_exporter import line

pytestmark = pytest.mark.live

SESSION_A = "session_2026-11-22_10-00-00_123456_4242"
SESSION_B = "session_2026-11-22_12-30-00_654321_5151"


def info(session: str) -> str:
    return f'verl_run_ray_session_info{{SessionName="{session}",experiment="exp",project="proj"}} 1.0'


def point_latest_at(temp_dir, session: str) -> None:
    (temp_dir / session).mkdir(exist_ok=True)
    link = temp_dir / "session_latest"
    if link.is_symlink():
        link.unlink()
    os.symlink(temp_dir / session, link)


def test_export_follows_rays_session_latest_and_a_given_session_wins(tmp_path):
    log = tmp_path / "proj" / "exp.jsonl"
    log.parent.mkdir()
    log.write_text(line(1, actor__ppo_kl=0.01))
    temp_dir = tmp_path / "ray"
    temp_dir.mkdir()
    exporter = start_exporter(log, "--ray-temp-dir", str(temp_dir))
    try:
        assert "verl_run_ray_session_info" not in exporter.scrape()  # Ray has not started yet
        point_latest_at(temp_dir, SESSION_A)
        assert info(SESSION_A) in exporter.scrape()
        point_latest_at(temp_dir, SESSION_B)  # a restarted cluster
        exposition = exporter.scrape()
        assert info(SESSION_B) in exposition and SESSION_A not in exposition
    finally:
        stop_process(exporter.process)
    stderr = exporter.process.stderr.read()
    assert f"no Ray session in {temp_dir} yet" in stderr

    exporter = start_exporter(log, "--ray-temp-dir", str(temp_dir), "--ray-session", SESSION_A)
    try:
        exposition = exporter.scrape()
        assert info(SESSION_A) in exposition and SESSION_B not in exposition
    finally:
        stop_process(exporter.process)


def test_a_malformed_ray_session_is_refused_with_the_option_named(tmp_path):
    process = start_exporter(tmp_path / "x.jsonl", "--ray-session", "not a session").process
    try:
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 1
    assert "--ray-session 'not a session': expected a Ray session name" in err
    assert "Traceback" not in err
