"""Per-attempt token limit enforcement."""

from __future__ import annotations

import threading

from tb_engine.interfaces import AgentOutputError
from tb_engine.transcript import Usage


class TokenLimitExceeded(AgentOutputError):
    """An attempt spent its token budget; raised before any further model call.

    It is an AgentOutputError so that today's runner, which knows only that, ends the
    attempt ``agent_error`` once its repair limit is reached (each re-raise costs no
    tokens); a runner that recognises this class may end the attempt ``max_turns`` at once.
    """

    def __init__(self, message: str, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.usage = usage or Usage()


class TokenBudget:
    """Counts input + output tokens of one attempt against a limit (None = unlimited)."""

    def __init__(self, limit: int | None) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"token budget: limit must be >= 1, got {limit!r}")
        self.limit = limit
        self.spent = 0
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.spent)

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.spent >= self.limit

    def charge(self, usage: Usage) -> None:
        """Add a call's tokens (input + output, reasoning being part of output)."""
        with self._lock:
            self.spent += usage.total_tokens

    def ensure_available(self, who: str = "attempt") -> None:
        """Raise TokenLimitExceeded before a call when nothing is left."""
        if self.exhausted:
            raise TokenLimitExceeded(f"{who}: token limit {self.limit} reached ({self.spent} tokens spent)")
