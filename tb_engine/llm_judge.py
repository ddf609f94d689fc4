"""LLM rubric judge: one yes/no decision per rubric question over the agent's final reply.

The judge sees only the question and the final reply. Its answer is parsed
strictly by default (``parse_yes_no_strict``: the first line must be exactly
"yes" or "no"; the lenient ``parse_yes_no`` is kept for callers that ask for it).
An answer that still cannot be read after ``parse_retries`` more calls, or a judge
endpoint that stays down, leaves the rubric *unjudged* (answer None, SPEC §2):
a judge that cannot decide is an evaluation gap, never the agent's failure.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tb_engine.interfaces import InfraError, JudgeVerdict
from tb_engine.llm.client import ChatClient
from tb_engine.llm.config import EndpointConfig, endpoint_and_options
from tb_engine.llm.text import truncate_text
from tb_engine.transcript import Usage

JUDGE_INSTRUCTIONS = """You grade a customer-support agent's final reply against one yes/no question.
Judge only from the reply text shown. Answer with exactly "yes" or "no" on the first line,
then one short sentence explaining why."""

_YES = {"yes", "y", "true", "correct", "pass"}
_NO = {"no", "n", "false", "incorrect", "fail"}
_LABEL = re.compile(r"^\s*(final\s+answer|answer|verdict|decision|result)\s*[:=\-]\s*", re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")


def parse_yes_no(text: str) -> bool | None:
    """Read a yes/no answer from free text: JSON, a labelled or leading word, else one unambiguous word."""
    cleaned = re.sub(r"[*_`#>\"']", "", text or "").strip()
    if not cleaned:
        return None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        data = None
    if isinstance(data, dict):
        for key in ("answer", "verdict", "decision", "result"):
            if key in data:
                value = data[key]
                if isinstance(value, bool):
                    return value
                return parse_yes_no(str(value))
    first_line = _LABEL.sub("", cleaned.splitlines()[0]).lower()
    first_words = _WORD.findall(first_line)
    if first_words and first_words[0] in _YES:
        return True
    if first_words and first_words[0] in _NO:
        return False
    words = set(_WORD.findall(cleaned.lower()))
    has_yes, has_no = "yes" in words, "no" in words
    if has_yes != has_no:
        return has_yes
    return None


_STRICT = re.compile(r"^\s*(yes|no)\s*[.!]?\s*$", re.IGNORECASE)


def parse_yes_no_strict(text: str) -> bool | None:
    """Strict reading: the first non-empty line is exactly "yes" or "no" (any case, one final . or !)."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return None
    match = _STRICT.match(lines[0])
    if match is None:
        return None
    return match.group(1).lower() == "yes"


class LLMJudge:
    """A Judge (tb_engine.interfaces) backed by a chat-completions model."""

    def __init__(
        self,
        config: EndpointConfig,
        *,
        instructions: str = JUDGE_INSTRUCTIONS,
        max_reply_chars: int | None = 20_000,
        parse_retries: int = 2,
        strict: bool = True,
    ) -> None:
        self.config = config
        self.instructions = instructions
        self.max_reply_chars = max_reply_chars
        self.parse_retries = parse_retries
        self.strict = strict
        self._client = ChatClient(config)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMJudge:
        """Build from stored settings: ``endpoint`` (EndpointConfig fields) plus the judge options."""
        allowed = {"instructions", "max_reply_chars", "parse_retries", "strict"}
        config, options = endpoint_and_options(data, what="judge", label="judge", allowed=allowed)
        return cls(config, **options)

    def build_messages(self, question: str, final_reply: str) -> list[dict[str, Any]]:
        """The judge's request: instructions, the question and the (truncated) final reply."""
        reply = truncate_text(final_reply, self.max_reply_chars) or "(the agent gave no final reply)"
        return [
            {"role": "system", "content": self.instructions},
            {
                "role": "user",
                "content": f"Question: {question}\n\nFinal reply of the agent:\n<<<\n{reply}\n>>>",
            },
        ]

    def judge(self, question: str, final_reply: str) -> JudgeVerdict:
        """Answer one rubric question (None: unjudged); usage covers every call made, including re-asks."""
        messages = self.build_messages(question, final_reply)
        parse = parse_yes_no_strict if self.strict else parse_yes_no
        usage = Usage()
        answers: list[str] = []
        where = f"judge endpoint {self.config.base_url} (model {self.config.model!r})"
        for _ in range(self.parse_retries + 1):
            try:
                result = self._client.complete(messages)
            except InfraError as exc:  # the client already spent its retries: the rubric stays unjudged
                return JudgeVerdict(
                    answer=None, explanation=f"unjudged: {where} unavailable: {exc}", usage=usage
                )
            usage = usage + result.usage
            answers.append(result.text)
            answer = parse(result.text)
            if answer is not None:
                return JudgeVerdict(answer=answer, explanation=result.text.strip(), usage=usage)
        return JudgeVerdict(
            answer=None,
            explanation=(
                f"unjudged: {where} gave no {'strict ' if self.strict else ''}yes/no answer after "
                f"{len(answers)} calls; last answer: {answers[-1][:200]!r}"
            ),
            usage=usage,
        )
