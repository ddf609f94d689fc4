"""TRL's ``GRPOTrainer(environment_factory=…)`` over our environment server (no TRL import here).

TRL wants a class whose public methods are the tools, ``reset(**row) -> str`` and a reward. Tools
differ per domain, so ``environment_factories(url, pool)`` asks the server for each domain's real
tool schemas (one probe episode per domain, closed at once) and builds one class per domain, its
tools as typed methods: JSON-schema types become annotations (enums become ``Literal``, arrays
``list[...]``), nested objects become ``dict`` with their full schema in the argument's
description, so the model sees every field, enum and requirement. The dict it returns is TRL's
multi-environment factory, keyed by the dataset's ``environment`` column (``training_rows``).

The dialogue stays ours: ``reply_to_user(message)`` is a tool whose result is the simulated
user's answer (scripted or LLM, run by the server), and TRL's final completion reaches the
grader (and the rubric judge) through ``episode_reward``, the function for ``reward_funcs``: it
sends the completion's last assistant text as the final reply and returns the verdict 1.0/0.0
(None when infrastructure failed: TRL then ignores that rollout).
"""

from __future__ import annotations

import inspect
import json
import keyword
from collections.abc import Callable
from typing import Any, Literal

import httpx2

from tb_engine.training.pool import read_pool

REPLY_TOOL = "reply_to_user"
Factory = Callable[[], "ThinkingBoxEnvironment"]


class EpisodeClient:
    """Thread-safe REST calls for one environment instance (TRL may call tools from worker threads)."""

    def __init__(self, url: str, timeout: float = 120.0):
        # trust_env=False: a proxy from the environment must never see the trainer's loopback traffic
        self.http = httpx2.Client(base_url=url, timeout=timeout, trust_env=False)

    def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post(path, json=payload)
        data = response.json()
        if response.status_code != 200:
            raise RuntimeError(f"{path}: HTTP {response.status_code}: {data.get('error', data)}")
        return data


class ThinkingBoxEnvironment:
    """Base of the generated per-domain classes: one episode at a time on the server."""

    url: str = ""
    domain: str = ""

    def __init__(self) -> None:
        self._client = EpisodeClient(self.url)
        self._episode: str | None = None
        self._done = False
        self._reward: float | None = None
        self.last_info: dict[str, Any] = {}

    def reset(self, task_id: str, **row: Any) -> str:
        """Start an episode on ``task_id`` (the row's other columns are TRL's); the system policy and
        the user's first message are what TRL appends to the prompt."""
        self._close()
        started = self._client.post("/reset", {"task_id": task_id})
        self._episode, self._done, self._reward, self.last_info = started["episode_id"], False, None, {}
        observation = started["observation"]
        first = "\n\n".join(m["content"] for m in observation["messages"] if m["role"] == "user")
        return f"{observation['policy']}\n\n{first}" if observation["policy"] else first

    def _step(self, action: dict[str, Any]) -> dict[str, Any]:
        if self._episode is None:
            raise RuntimeError("no episode: reset first")
        if self._done:
            raise RuntimeError("the episode has ended")
        answer = self._client.post("/step", {"episode_id": self._episode, "action": action})
        if answer["done"]:
            self._done, self._reward, self.last_info = True, answer["reward"], answer["info"]
        return answer

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        """One tool call; its result text (errors too: the model should see them)."""
        arguments = {k: v for k, v in arguments.items() if v is not None}
        answer = self._step({"tool_calls": [{"name": name, "arguments": arguments}]})
        texts = [m["content"] for m in answer["observation"]["messages"]]
        return "\n".join(texts) if texts else "(no result)"

    def reply_to_user(self, message: str) -> str:
        """Send a message to the user (a question, a confirmation request) and get their answer.

        Args:
            message: What to tell or ask the user.
        """
        answer = self._step({"text": message})
        replies = [m["content"] for m in answer["observation"]["messages"] if m["role"] == "user"]
        if answer["done"]:
            return "\n".join(replies) or "(the user has ended the conversation)"
        return "\n".join(replies)

    def _finish(self, final_reply: str) -> float | None:
        """Send the final reply (graded and judged) unless the episode already ended; the reward."""
        if self._episode is not None and not self._done:
            self._step({"text": final_reply or "(no reply)", "done": True})
        reward = self._reward
        self._close()
        return reward

    def _close(self) -> None:
        """Free the server-side episode now (not at its TTL)."""
        episode, self._episode = self._episode, None
        if episode is not None:
            try:
                self._client.post("/close", {"episode_id": episode})
            except RuntimeError:  # expired meanwhile: nothing left to free
                pass


def _final_text(completion: Any) -> str:
    """The last assistant text of a completion (conversational: a list of messages) or the string."""
    if isinstance(completion, str):
        return completion
    for message in reversed(completion or []):
        if message.get("role") == "assistant" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


def episode_reward(
    completions: list[Any], environments: list[ThinkingBoxEnvironment] | None = None, **kwargs: Any
) -> list[float | None]:
    """For ``reward_funcs``: the grader's verdict per rollout, after the final reply reaches it."""
    if environments is None:
        raise ValueError("episode_reward needs GRPOTrainer(environment_factory=...): no environments given")
    return [env._finish(_final_text(c)) for c, env in zip(completions, environments, strict=True)]


# -- tools as typed methods ---------------------------------------------------------------------

_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict}


def annotation(schema: dict[str, Any]) -> Any:
    """A Python type whose transformers JSON schema matches ``schema`` as far as type hints can say."""
    if "enum" in schema and schema["enum"]:
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind == "array":
        items = schema.get("items")
        if isinstance(items, dict) and items:
            item_type = annotation(items)
            return list.__class_getitem__(item_type)  # list[item_type], built at run time
        return list
    if kind in _SCALARS:
        return _SCALARS[kind]
    for key in ("anyOf", "oneOf"):
        options = [o for o in schema.get(key) or [] if o.get("type") != "null"]
        if len(options) == 1:
            return annotation(options[0])
    return str if kind is None and not schema else dict


def _needs_schema_text(schema: dict[str, Any]) -> bool:
    """Objects (at any depth) lose their fields in a type hint: the description carries them."""
    if schema.get("type") == "object" or "properties" in schema:
        return True
    items = schema.get("items")
    return isinstance(items, dict) and _needs_schema_text(items)


def _description(name: str, schema: dict[str, Any]) -> str:
    text = " ".join(str(schema.get("description") or name.replace("_", " ")).split())
    if _needs_schema_text(schema):
        nested = {k: v for k, v in schema.items() if k != "description"}
        text += f" JSON schema: {json.dumps(nested, separators=(',', ':'))}"
    return text


def tool_method(tool: dict[str, Any]) -> Callable[..., str]:
    """A method calling ``tool`` on the episode, typed and documented from its JSON schema."""
    name = tool["name"]
    parameters = tool.get("parameters") or {}
    properties: dict[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    for arg in properties:
        if not arg.isidentifier() or keyword.iskeyword(arg):
            raise ValueError(f"tool {name}: argument {arg!r} cannot be a Python parameter name")

    def method(self: ThinkingBoxEnvironment, **arguments: Any) -> str:
        return self._call(name, arguments)

    ordered = sorted(properties, key=lambda a: a not in required)  # required first, as Python demands
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for arg in ordered:
        hint = annotation(properties[arg])
        if arg not in required:
            hint = hint | None
        annotations[arg] = hint
        default = inspect.Parameter.empty if arg in required else None
        params.append(
            inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint)
        )
    annotations["return"] = str
    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    summary = " ".join(str(tool.get("description") or name).split())
    args_doc = "".join(f"\n    {arg}: {_description(arg, properties[arg])}" for arg in ordered)
    method.__doc__ = f"{summary}\n\nArgs:{args_doc}\n" if ordered else summary
    return method


def environment_class(url: str, domain: str, tools: list[dict[str, Any]]) -> type[ThinkingBoxEnvironment]:
    """The TRL environment class of one domain: its tools as methods, plus reset and reply_to_user."""
    members: dict[str, Any] = {"url": url, "domain": domain}
    for tool in tools:
        if tool["name"] in ("reset", REPLY_TOOL) or tool["name"].startswith("_"):
            raise ValueError(
                f"domain {domain}: tool name {tool['name']!r} clashes with the environment's own"
            )
        members[tool["name"]] = tool_method(tool)
    class_name = "".join(part.capitalize() for part in domain.replace("-", "_").split("_") if part) + "Env"
    return type(class_name, (ThinkingBoxEnvironment,), members)


def environment_factories(
    url: str, tasks_by_domain: dict[str, str]
) -> dict[str, type[ThinkingBoxEnvironment]]:
    """One class per domain, for ``GRPOTrainer(environment_factory=...)``; ``tasks_by_domain`` names one
    task of each domain, on which a probe episode is reset (and closed) to read the real tool schemas."""
    client = EpisodeClient(url)
    classes: dict[str, type[ThinkingBoxEnvironment]] = {}
    for domain, task_id in sorted(tasks_by_domain.items()):
        started = client.post("/reset", {"task_id": task_id})
        client.post("/close", {"episode_id": started["episode_id"]})
        classes[domain] = environment_class(url, domain, started["observation"]["tools"])
    return classes


def training_rows(pool_file: str, *, repeat: int = 1) -> list[dict[str, Any]]:
    """Dataset rows from a pool file: ``{prompt, environment (the domain), task_id}`` per pool task.

    Build the dataset with ``datasets.Dataset.from_list(rows)``; the prompt's user message is empty
    because ``reset`` supplies the policy and the user's first message."""
    pool = read_pool(pool_file)
    rows = []
    for index, entry in enumerate(pool.data["tasks"]):
        domain = entry.get("domain")
        if not isinstance(domain, str) or not domain:
            raise ValueError(f"{pool.path}: tasks[{index}].domain: missing")
        rows.append(
            {"prompt": [{"role": "user", "content": ""}], "environment": domain, "task_id": entry["task_id"]}
        )
    return rows * repeat


def tasks_by_domain(rows: list[dict[str, Any]]) -> dict[str, str]:
    """One task id per domain of the rows (what ``environment_factories`` probes)."""
    found: dict[str, str] = {}
    for row in rows:
        found.setdefault(row["environment"], row["task_id"])
    return found
