"""A fresh gunicorn worker is warmed before it serves (docker/gunicorn.conf.py's post_worker_init)."""

from __future__ import annotations

import runpy
from pathlib import Path

from thinkingbox_web import warmup

ROOT = Path(__file__).resolve().parents[2]


def test_warm_up_compiles_every_project_template(monkeypatch):
    compiled = []
    real = warmup.get_template
    monkeypatch.setattr(warmup, "get_template", lambda name: compiled.append(name) or real(name))

    warmup.warm_web_process()

    expected = sorted(
        str(path.relative_to(ROOT / "templates")) for path in (ROOT / "templates").rglob("*.html")
    )
    assert "dashboard/leaderboard.html" in expected
    assert sorted(compiled) == expected


def test_gunicorn_runs_the_warm_up_after_each_worker_starts(monkeypatch):
    calls = []
    monkeypatch.setattr(warmup, "warm_web_process", lambda: calls.append("warmed") or 0.0)
    config = runpy.run_path(str(ROOT / "docker" / "gunicorn.conf.py"))

    config["post_worker_init"](worker=None)

    assert calls == ["warmed"]
