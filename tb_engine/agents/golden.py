"""The golden agent: replays a task's golden trajectory (a harness self-check; it must pass every valid task)."""

from __future__ import annotations

from tb_engine.interfaces import AgentStep, AgentView
from tb_engine.spec import GoldenCall, TaskSpec
from tb_engine.transcript import ToolCallRequest

DEFAULT_REPLY = "I have taken care of your request."


class GoldenAgent:
    """Issues every golden call in its first step, then gives the task's golden reply and declares done.

    The plan comes from the factory (``make_golden_agent``), never from the view: the view it is
    driven with is the same untrusted view any agent gets.
    """

    name = "golden"

    def __init__(self, plan: tuple[GoldenCall, ...], reply: str = DEFAULT_REPLY):
        self._plan = plan
        self._reply = reply or DEFAULT_REPLY
        self._issued = False

    def step(self, view: AgentView) -> AgentStep:
        if not self._issued and self._plan:
            self._issued = True
            calls = [
                ToolCallRequest(f"golden-{i}", call.tool, dict(call.arguments))
                for i, call in enumerate(self._plan)
            ]
            return AgentStep(tool_calls=calls)
        return AgentStep(text=self._reply, done=True)


def make_golden_agent(task: TaskSpec) -> GoldenAgent:
    """A golden agent for one task."""
    return GoldenAgent(task.golden, task.extra.get("golden_reply") or DEFAULT_REPLY)
