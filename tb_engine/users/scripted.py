"""Offline user simulator: sends the query, answers a follow-up question politely, then ends."""

from __future__ import annotations

import re

from tb_engine.interfaces import UserStep, UserView

MAX_FOLLOW_UPS = 2


class ScriptedUser:
    """Deterministic user: the first message is the task query; an agent question (text ending in '?')
    gets a fixed polite line drawn from the user context (at most MAX_FOLLOW_UPS times); any other
    reply without tool calls ends the conversation."""

    name = "scripted"

    def __init__(self, max_follow_ups: int = MAX_FOLLOW_UPS):
        self.max_follow_ups = max_follow_ups

    def reply(self, view: UserView) -> UserStep:
        if not any(m.role == "user" for m in view.messages):
            return UserStep(text=view.query)
        last = next((m for m in reversed(view.messages) if m.role == "assistant"), None)
        follow_ups = sum(1 for m in view.messages if m.role == "user") - 1
        if last is not None and last.content.rstrip().endswith("?") and follow_ups < self.max_follow_ups:
            return UserStep(text=follow_up_line(view.user_context))
        return UserStep(text="Thank you.", done=True)


def follow_up_line(user_context: str) -> str:
    """The fixed polite follow-up answer: a go-ahead plus the first sentence of the user's context."""
    first = re.split(r"(?<=[.!?])\s", user_context.strip(), maxsplit=1)[0] if user_context.strip() else ""
    return "Yes, please go ahead with what I asked." + (f" For reference: {first}" if first else "")
