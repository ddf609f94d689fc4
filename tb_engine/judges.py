"""Rubric judges. KeywordJudge is the offline judge for built-in tasks (an LLM judge lives here too)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tb_engine.interfaces import JudgeVerdict
from tb_engine.llm_judge import JUDGE_INSTRUCTIONS
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


@dataclass(frozen=True)
class JudgeIdentity:
    """What makes two judges the same for calibration: kind, model and prompt (a content hash names the version)."""

    kind: str
    model: str = ""
    prompt: str = ""

    @property
    def key(self) -> str:
        """SHA-256 over kind, model and prompt: any change of one of them is a new judge version."""
        blob = json.dumps([self.kind, self.model, self.prompt], separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def label(self) -> str:
        """A short name for pages: "keyword", "llm gpt-4o-mini · prompt 1a2b3c4d"."""
        parts = [self.kind]
        if self.model:
            parts.append(self.model)
        text = " ".join(parts)
        if self.prompt:
            text += f" · prompt {hashlib.sha256(self.prompt.encode()).hexdigest()[:8]}"
        return text


def judge_identity(config: Mapping[str, Any] | None) -> JudgeIdentity:
    """The identity of a stored judge configuration (a campaign's ``judge``: ``{}``/keyword, llm, imported…).

    An LLM judge without its own instructions uses the engine's default prompt, which is then part
    of its identity, so changing that default makes a new judge version too.
    """
    config = dict(config or {})
    kind = str(config.get("kind") or "keyword")
    found = config.get("endpoint")
    endpoint: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    model = str(config.get("model") or endpoint.get("model") or "")
    prompt = str(config.get("instructions") or config.get("prompt") or "")
    if kind == "keyword":
        return JudgeIdentity(kind)  # its "prompt" is the keywords of each task, versioned with the task
    if kind == "imported":
        return JudgeIdentity(kind, model or str(config.get("source") or ""), prompt)
    if not prompt:
        prompt = JUDGE_INSTRUCTIONS
    return JudgeIdentity(kind, model, prompt)
