"""Helpers for engine tests: the retail folder, a scripted test agent, spec-file writers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tb_engine.interfaces import AgentStep, AgentView
from tb_engine.loader import SUITES_DIR
from tb_engine.transcript import ToolCallRequest

RETAIL_DIR = SUITES_DIR / "starter" / "retail"


class ScriptAgent:
    """Plays a fixed list of steps: each item is a list of (tool, arguments) calls or a final text."""

    name = "script"

    def __init__(self, steps, final_text: str = "Done.", done: bool = True):
        self.steps = list(steps)
        self.final_text = final_text
        self.done = done
        self.views: list[AgentView] = []

    def step(self, view: AgentView) -> AgentStep:
        self.views.append(view)
        if self.steps:
            item = self.steps.pop(0)
            if isinstance(item, str):
                return AgentStep(text=item)
            calls = [
                ToolCallRequest(f"c{len(self.views)}-{i}", tool, args) for i, (tool, args) in enumerate(item)
            ]
            return AgentStep(tool_calls=calls)
        return AgentStep(text=self.final_text, done=self.done)


def with_changes(task, **changes):
    """A copy of a task with some fields replaced (specs are frozen)."""
    return dataclasses.replace(task, **changes)


def write_domain(tmp_path: Path, domain_yaml: str, tools_py: str, tasks_yaml: str | None = None) -> Path:
    folder = tmp_path / "dom"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "domain.yaml").write_text(domain_yaml)
    (folder / "tools.py").write_text(tools_py)
    if tasks_yaml is not None:
        (folder / "tasks.yaml").write_text(tasks_yaml)
    return folder
