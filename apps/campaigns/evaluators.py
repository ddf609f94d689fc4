"""The user simulator and the judge a campaign runs with: checked once, stored as plain JSON.

One reading for the launch page, the API and ``run_campaign``: the engine's normalisers
(``tb_engine.attempt_setup.normalise_user_config`` / ``normalise_judge_config``) check the
shape (an LLM judge at temperature 0 with strict yes/no parsing; a user-simulator prompt with
its placeholders), and credentials are only ever the *name* of an environment variable on the
workers (``api_key_env``), never a key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from apps.agents.services import api_key_env_refusal, base_url_refusal
from tb_engine.attempt_setup import normalise_judge_config, normalise_user_config

# The same rule as the agent configurations' api_key_env (apps.api.views_config).
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_FIELDS = ("api_key", "apikey", "key", "secret", "token", "password", "authorization")


class EvaluatorConfigError(ValueError):
    """A user-simulator or judge configuration that cannot be stored (the message names the field).

    ``field`` is the configuration's field at fault when one is known (forms put the error on it).
    """

    def __init__(self, message: str, *, field: str = ""):
        super().__init__(message)
        self.field = field


def _credentials_checked(config: Mapping[str, Any], what: str) -> None:
    for name in config:
        if str(name).lower().replace("-", "_") in SECRET_FIELDS:
            raise EvaluatorConfigError(
                f"{what}: {name}: send no credentials; name the environment variable in api_key_env",
                field=str(name),
            )
    env = config.get("api_key_env")
    if env and not (isinstance(env, str) and ENV_NAME.match(env)):
        raise EvaluatorConfigError(
            f"{what}: api_key_env: must be an environment variable name like OPENAI_API_KEY, not a key",
            field="api_key_env",
        )
    # The agents' allow-list: the worker sends this variable's value to the evaluator's base_url.
    refusal = api_key_env_refusal(env) if env else ""
    if refusal:
        raise EvaluatorConfigError(f"{what}: api_key_env: {refusal}", field="api_key_env")
    # The outbound policy: the worker POSTs to base_url and keeps what comes back.
    nested = config.get("endpoint")
    url = (nested if isinstance(nested, Mapping) else config).get("base_url")
    refusal = base_url_refusal(url) if isinstance(url, str) else ""
    if refusal:
        raise EvaluatorConfigError(f"{what}: base_url: {refusal}", field="base_url")


def evaluator_configs(
    *, user: Mapping[str, Any] | None, judge: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The user-simulator and judge configurations in their stored form; raises EvaluatorConfigError."""
    checked = []
    for what, config, normalise in (
        ("user simulator", user, normalise_user_config),
        ("judge", judge, normalise_judge_config),
    ):
        config = dict(config or {})
        _credentials_checked(config, what)
        try:
            checked.append(normalise(config))
        except ValueError as exc:
            # The engine's messages read "<what>: <field>: <problem>".
            parts = str(exc).split(": ")
            raise EvaluatorConfigError(str(exc), field=parts[1] if len(parts) > 2 else "") from exc
    return checked[0], checked[1]


def describe(config: Mapping[str, Any] | None, *, default: str) -> str:
    """One line for pages: 'scripted', 'keyword', or 'LLM <model> at <base_url>'."""
    config = dict(config or {})
    kind = config.get("kind") or default
    if kind == "llm":
        return f"LLM {config.get('model', '?')} at {config.get('base_url', '?')}"
    if kind == "imported":
        return f"imported from {config.get('source', '?')}"
    return str(kind)
