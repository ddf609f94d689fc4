"""run.py (the README's two commands): report counting and the rules for skips and empty runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ONE_FAST_TEST = "tests/core/test_tasks_and_services.py::test_assign_role_is_idempotent"


@pytest.fixture
def run_script(monkeypatch):
    spec = importlib.util.spec_from_file_location("tb_run_script", PROJECT_ROOT / "run.py")
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the file executes.
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def machine_without_services(run_script, monkeypatch, tmp_path):
    """No TEST_* URLs, no PostgreSQL or Redis binaries to be found."""
    monkeypatch.delenv("TEST_DATABASE_URL", raising=False)
    monkeypatch.delenv("TEST_REDIS_URL", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(run_script, "POSTGRES_LIB_DIR", tmp_path / "no-postgresql")
    return run_script


def test_count_junit_sums_suites_and_counts_errors_as_failures(run_script, tmp_path):
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite tests="10" failures="1" errors="2" skipped="3"/>'
        '<testsuite tests="4" failures="0" errors="0" skipped="1"/></testsuites>'
    )
    assert run_script.count_junit(report) == (7, 3, 4)


def test_install_fingerprint_changes_with_constraints(run_script, monkeypatch, tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    monkeypatch.setattr(run_script, "ROOT", tmp_path)
    before = run_script.install_fingerprint()
    (tmp_path / "constraints.txt").write_text("Django==5.2.19\n")
    assert run_script.install_fingerprint() != before


def test_missing_postgres_is_reported_as_unavailable(machine_without_services):
    with pytest.raises(machine_without_services.ServiceUnavailable) as excinfo:
        machine_without_services.start_integration_services([])
    assert str(excinfo.value) == (
        "PostgreSQL binary 'initdb' not found (install postgresql or set TEST_DATABASE_URL)"
    )


def test_command_test_skipped_integration_fails_on_ci(machine_without_services, monkeypatch, capsys):
    monkeypatch.setenv("CI", "true")
    exit_code = machine_without_services.command_test(sys.executable, [ONE_FAST_TEST])
    lines = capsys.readouterr().out.splitlines()
    assert exit_code == 1
    assert "integration subset SKIPPED: PostgreSQL binary 'initdb' not found" in "\n".join(lines)
    assert lines[-2] == "1 passed, 0 failed"


def test_command_test_skipped_integration_passes_off_ci(machine_without_services, monkeypatch, capsys):
    monkeypatch.delenv("CI", raising=False)
    exit_code = machine_without_services.command_test(sys.executable, [ONE_FAST_TEST])
    lines = capsys.readouterr().out.splitlines()
    assert exit_code == 0
    assert lines[-1] == "1 passed, 0 failed"


def test_command_test_no_tests_ran_is_a_failure(machine_without_services, monkeypatch, capsys):
    monkeypatch.delenv("CI", raising=False)
    exit_code = machine_without_services.command_test(
        # One small file, not the whole suite: collecting 2,000 tests only to deselect them took minutes.
        sys.executable,
        ["tests/core/test_tasks_and_services.py", "-k", "no_test_is_named_like_this"],
    )
    lines = capsys.readouterr().out.splitlines()
    assert exit_code == 1
    assert lines[-2] == "0 passed, 0 failed"


class RecordingService:
    def __init__(self, stopped: list):
        self.stopped = stopped

    def stop(self) -> None:
        self.stopped.append(self)


@pytest.mark.parametrize("ending", ["success", "failure", "ctrl-c", "sigterm"])
def test_command_test_stops_every_service_it_started(run_script, monkeypatch, ending):
    import os
    import signal

    stopped: list = []

    def start_services(stack):
        stack.extend([RecordingService(stopped), RecordingService(stopped)])
        return "postgres://x", "redis://x"

    def fake_pytest(python, label, args, env, report_dir):
        if label == "integration" and ending == "ctrl-c":
            raise KeyboardInterrupt
        if label == "integration" and ending == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        return run_script.RunResult(label, 1 if ending == "failure" else 0)

    monkeypatch.setattr(run_script, "servers_python", lambda python: ("", ""))
    monkeypatch.setattr(run_script, "start_integration_services", start_services)
    monkeypatch.setattr(run_script, "run_pytest", fake_pytest)
    before = signal.getsignal(signal.SIGTERM)

    if ending in ("ctrl-c", "sigterm"):
        with pytest.raises(KeyboardInterrupt):
            run_script.command_test(sys.executable, [])
    else:
        assert run_script.command_test(sys.executable, []) == (1 if ending == "failure" else 0)

    assert len(stopped) == 2
    assert signal.getsignal(signal.SIGTERM) is before


def test_throwaway_redis_stop_also_stops_a_server_restarted_on_its_port(run_script):
    import shutil
    import subprocess
    import time

    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server not installed")
    redis = run_script.ThrowawayRedis()
    redis.start()
    port = redis.port
    try:
        # What the broker-outage test does: shut the server down, start a daemonized one in its place.
        run_script.redis_shutdown("127.0.0.1", port)
        redis.process.wait(timeout=10)
        subprocess.run(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--daemonize", "yes"],
            check=True,
            capture_output=True,
        )
        deadline = time.monotonic() + 10
        while not run_script.redis_answers_ping("127.0.0.1", port) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run_script.redis_answers_ping("127.0.0.1", port) is True
    finally:
        redis.stop()

    assert run_script.redis_answers_ping("127.0.0.1", port) is False
