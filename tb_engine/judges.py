"""Rubric judges. KeywordJudge is the offline judge for built-in tasks (an LLM judge lives here too)."""

from __future__ import annotations

import re

from tb_engine.interfaces import JudgeVerdict
from tb_engine.spec import TaskSpec


class KeywordJudge:
    """Offline string-matching judge: "yes" iff the reply contains every keyword listed for the question.

    It does not understand language. It exists so built-in tasks can be graded without a model;
    a question with no keywords cannot be judged offline: its answer is None (*unjudged*, SPEC §2),
    which is never the agent's failure.
    """

    name = "keyword"

    def __init__(self, keywords: dict[str, list[str]]):
        self.keywords = {question: [w.lower() for w in words] for question, words in keywords.items()}

    @classmethod
    def for_task(cls, task: TaskSpec) -> KeywordJudge:
        """The judge configured by a task's ``rubrics[].keywords``."""
        return cls(dict(task.extra.get("rubric_keywords") or {}))

    def judge(self, question: str, final_reply: str) -> JudgeVerdict:
        words = self.keywords.get(question)
        if not words:
            return JudgeVerdict(None, "unjudged: keyword judge has no keywords for this question")
        text = re.sub(r"\s+", " ", final_reply.lower())
        missing = [w for w in words if w not in text]
        if missing:
            return JudgeVerdict(False, f"keyword judge: reply lacks {', '.join(missing)}")
        return JudgeVerdict(True, f"keyword judge: reply mentions {', '.join(words)}")
