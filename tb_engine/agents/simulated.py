"""Seeded simulated personas: harness constructs that follow a mutated golden plan.

A persona is NOT a model. The factory hands it the task's golden plan (SPEC §7 allows
this for labelled harness constructs); it is then stepped with the ordinary untrusted
``AgentView`` like any agent. Each persona has

* a per-task latent difficulty ``u`` in [0, 1) drawn from hash(persona, task id) — not
  from the campaign seed, so what a persona is good at is stable across campaigns;
* a profile mapping ``u`` to a per-attempt success probability;
* failure modes, applied by mutating the plan with per-attempt randomness from ``seed``:
  skip a state-changing call (missing effect), change an enum argument or perturb a
  number (wrong value), repeat a write or aim it at another record of the same table
  (extra effect), or give up early (missing effect).

The *family* (``FAMILY``, also in ``PERSONAS``) are sixteen further personas with distinct skill
profiles, made to calibrate and validate item response models on (docs/adaptive.md): instead of
one latent per task they share task latents (difficulty, discrimination; hashed from the task id)
and differ in per-domain ability, per-task-type weaknesses, consistency and idiosyncratic noise.

What was mutated is kept on the agent object (``mutations``, ``intends_success``) for
tests only; nothing of it reaches the transcript the grader stores.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from tb_engine.interfaces import AgentStep, AgentView
from tb_engine.spec import DomainSpec, GoldenCall, TaskSpec
from tb_engine.transcript import Message, ToolCallRequest, Usage

FAILURE_MODES = ("skip_write", "wrong_enum", "wrong_number", "repeat_write", "other_record", "give_up")
# The diff kind each mode is built to produce (other_record also leaves the intended write missing).
MODE_DIFF_KIND = {
    "skip_write": "missing_effect",
    "give_up": "missing_effect",
    "wrong_enum": "wrong_value",
    "wrong_number": "wrong_value",
    "repeat_write": "extra_effect",
    "other_record": "extra_effect",
}
# Repeating an update is often idempotent; repeating a creation always leaves an extra row.
CREATION_PREFIXES = (
    "create",
    "add",
    "issue",
    "open",
    "record",
    "log",
    "send",
    "book",
    "insert",
    "file",
    "submit",
)


def unit_hash(*parts: object) -> float:
    """A deterministic number in [0, 1) from the given parts (stable across processes)."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


TASK_TYPES = ("trap", "single_write", "multi_write")
_NORMAL = NormalDist()


def task_type(task: TaskSpec, domain: DomainSpec) -> str:
    """A skill family's weak spots: trap (tagged forbidden-effect), else single_write or multi_write."""
    if "forbidden-effect" in task.tags:
        return "trap"
    writes = 0
    for call in task.golden:
        spec = domain.tools.get(call.tool)
        writes += spec is None or not spec.read_only  # unknown tools count as state-changing (SPEC §1)
    return "single_write" if writes <= 1 else "multi_write"


def task_latents(task_id: str) -> tuple[float, float]:
    """(difficulty, discrimination) shared by every family persona; 2% of tasks do not discriminate at all."""
    difficulty = 1.2 * _NORMAL.inv_cdf(min(max(unit_hash("task-difficulty", task_id), 1e-9), 1 - 1e-9))
    if unit_hash("task-ambiguous", task_id) < 0.02:
        return difficulty, 0.0  # success does not depend on skill (e.g. an ambiguous request)
    spread = _NORMAL.inv_cdf(min(max(unit_hash("task-discrimination", task_id), 1e-9), 1 - 1e-9))
    return difficulty, math.exp(0.3 * spread)


@dataclass(frozen=True)
class SkillProfile:
    """How a family persona's per-task success probability is made (all on the logit scale).

    logit p = consistency * (discrimination * (ability[domain] - difficulty) - weakness[type]) + noise,
    where ability[domain] = base + domains.get(domain, 0), noise ~ N(0, noise_sd) is hashed from
    (persona, task) — stable across campaigns like the personas' latent — and the task latents come
    from ``task_latents``. Consistency scales the whole logit: high values push every task towards
    always or never, low values towards a coin flip.
    """

    base: float
    domains: dict[str, float] = field(default_factory=dict)
    weaknesses: dict[str, float] = field(default_factory=dict)  # task type -> logit penalty
    consistency: float = 1.0
    noise_sd: float = 0.5

    def logit(self, name: str, task: TaskSpec, domain: DomainSpec) -> float:
        difficulty, discrimination = task_latents(task.id)
        ability = self.base + self.domains.get(task.domain, 0.0)
        weakness = self.weaknesses.get(task_type(task, domain), 0.0)
        u = min(max(unit_hash("family-noise", name, task.id), 1e-9), 1 - 1e-9)
        noise = self.noise_sd * _NORMAL.inv_cdf(u)
        return self.consistency * (discrimination * (ability - difficulty) - weakness) + noise


@dataclass(frozen=True)
class Persona:
    name: str
    description: str
    # latent difficulty u -> P(attempt follows the plan); unused when a skill profile is given
    success_probability: Callable[[float], float]
    failure_weights: dict[str, float]
    second_mutation: float = 0.0  # chance a failing attempt gets a second, independent mutation
    reasoning_share: float = 0.0  # hidden reasoning tokens per visible output token
    extra_lookup: float = 0.0  # chance of a redundant read-only call up front (harmless noise)
    profile: SkillProfile | None = None  # family personas: task-dependent success (see SkillProfile)

    @property
    def agent_name(self) -> str:
        return f"sim:{self.name} (simulated persona, not a model)"

    def task_success_probability(self, task: TaskSpec, domain: DomainSpec) -> float:
        """P(an attempt of ``task`` follows the plan) for this persona."""
        if self.profile is None:
            return self.success_probability(unit_hash("persona-difficulty", self.name, task.id))
        logit = self.profile.logit(self.name, task, domain)
        return 1.0 / (1.0 + math.exp(-logit)) if logit > -700 else 0.0


def intends_success(
    persona: Persona, *, task: TaskSpec, domain: DomainSpec, seed: int, probability: float | None = None
) -> bool:
    """Whether the attempt seeded ``seed`` follows the golden plan (SimulatedAgent's first random draw).

    Replays of simulated campaigns read this instead of running the sandbox; an attempt that
    intends success passes, one that does not fails unless its mutation happens to be harmless.
    ``probability`` (the persona's ``task_success_probability``) saves recomputing it per attempt.
    """
    if probability is None:
        probability = persona.task_success_probability(task, domain)
    return random.Random(f"{persona.name}|{task.id}|{seed}").random() < probability


PERSONAS: dict[str, Persona] = {
    persona.name: persona
    for persona in (
        Persona(
            name="steady",
            description="Simulated persona, not a model: narrow but consistent. Solves about 40% of the "
            "tasks essentially every time and the rest almost never (skips or abandons the writes).",
            success_probability=lambda u: 0.997 if u < 0.4 else 0.003,
            failure_weights={"skip_write": 1.0, "give_up": 1.0},
        ),
        Persona(
            name="explorer",
            description="Simulated persona, not a model: broad but inconsistent. Solves most tasks "
            "some of the time (20-70% per task) with every kind of slip; spends reasoning tokens.",
            success_probability=lambda u: 0.2 + 0.5 * (u / 0.92) if u < 0.92 else 0.0,
            failure_weights=dict.fromkeys(FAILURE_MODES, 1.0),
            reasoning_share=1.6,
            extra_lookup=0.3,
        ),
        Persona(
            name="careless",
            description="Simulated persona, not a model: fast and confident. Frequently writes wrong "
            "values or touches extra records, and always reports success.",
            success_probability=lambda u: 0.35 + 0.4 * u,
            failure_weights={
                "wrong_enum": 3.0,
                "wrong_number": 3.0,
                "other_record": 2.0,
                "repeat_write": 2.0,
            },
            second_mutation=0.3,
        ),
        Persona(
            name="cautious",
            description="Simulated persona, not a model: hesitant. Often stops before writing or "
            "leaves out a write, but never touches what it should not.",
            success_probability=lambda u: 0.55 + 0.4 * u,
            failure_weights={"give_up": 2.0, "skip_write": 1.0},
        ),
    )
}


def _family_member(name: str, summary: str, profile: SkillProfile) -> Persona:
    return Persona(
        name=f"family-{name}",
        description=f"Simulated persona, not a model (skill family): {summary}",
        success_probability=lambda u: 0.0,  # never read: the profile decides
        failure_weights=dict.fromkeys(FAILURE_MODES, 1.0),
        profile=profile,
    )


_DOMAIN_EXPERT = "strong in {0}, weak elsewhere."
FAMILY: dict[str, Persona] = {
    persona.name: persona
    for persona in (
        _family_member("ace", "strong everywhere and consistent.", SkillProfile(2.2, consistency=1.6)),
        _family_member("solid", "good everywhere.", SkillProfile(1.2, consistency=1.3)),
        _family_member("average", "middling everywhere.", SkillProfile(0.3)),
        _family_member("novice", "weak everywhere.", SkillProfile(-1.0)),
        *(
            _family_member(
                f"{short}-expert", _DOMAIN_EXPERT.format(domain), SkillProfile(-0.3, {domain: 2.5})
            )
            for short, domain in (
                ("retail", "retail"),
                ("travel", "travel"),
                ("insurance", "insurance"),
                ("bank", "neobank"),
                ("desk", "servicedesk"),
            )
        ),
        _family_member(
            "metronome",
            "middling but very consistent: tasks are solved always or never.",
            SkillProfile(0.6, consistency=2.6, noise_sd=0.3),
        ),
        _family_member(
            "coin-flipper",
            "middling and erratic: most tasks are solved some of the time.",
            SkillProfile(0.6, consistency=0.5),
        ),
        _family_member(
            "overeager",
            "good, but falls for the tasks that tempt a forbidden side effect.",
            SkillProfile(1.0, weaknesses={"trap": 3.0}),
        ),
        _family_member(
            "one-step",
            "good at single writes, poor at tasks with several writes.",
            SkillProfile(1.0, weaknesses={"multi_write": 2.0}),
        ),
        _family_member(
            "hesitant-writer",
            "avoids every trap, hesitates on ordinary writes.",
            SkillProfile(0.8, weaknesses={"single_write": 1.2, "multi_write": 1.2, "trap": -1.5}),
        ),
        _family_member(
            "uneven",
            "good at retail and travel, poor at insurance and banking.",
            SkillProfile(
                0.5, {"retail": 1.2, "travel": 1.2, "insurance": -1.2, "neobank": -1.2}, consistency=1.2
            ),
        ),
        _family_member(
            "erratic-strong",
            "strong but erratic, with much task-to-task noise.",
            SkillProfile(1.8, consistency=0.7, noise_sd=0.8),
        ),
    )
}
PERSONAS.update(FAMILY)


@dataclass(frozen=True)
class Mutation:
    """What a persona changed in the golden plan (test evidence; never written to the transcript)."""

    mode: str
    call_index: int  # index in the golden plan
    detail: str


def make_simulated_agent(persona: str, *, task: TaskSpec, domain: DomainSpec, seed: int) -> SimulatedAgent:
    """A seeded simulated persona for one attempt of ``task``; raises KeyError naming unknown personas."""
    if persona not in PERSONAS:
        raise KeyError(f"simulated persona {persona!r} is unknown; known: {', '.join(sorted(PERSONAS))}")
    return SimulatedAgent(PERSONAS[persona], task=task, domain=domain, seed=seed)


class SimulatedAgent:
    """Follows a (possibly mutated) golden plan, one tool call per step, then a closing summary."""

    def __init__(self, persona: Persona, *, task: TaskSpec, domain: DomainSpec, seed: int):
        self.persona = persona
        self.name = persona.agent_name
        self.description = persona.description
        self.task = task
        self.domain = domain
        self.latent = unit_hash("persona-difficulty", persona.name, task.id)
        self.success_probability = persona.task_success_probability(task, domain)
        self._salt = f"{persona.name}|{task.id}|{seed}"
        self.rng = random.Random(self._salt)
        self.intends_success = self.rng.random() < self.success_probability  # as intends_success()
        self.mutations: list[Mutation] = []
        self.gave_up = False
        plan = [GoldenCall(c.tool, copy.deepcopy(dict(c.arguments))) for c in task.golden]
        if not self.intends_success:
            plan = self._mutate(plan)
        self.plan = self._add_lookup_noise(plan)
        self._previous_input = 0

    # ---- plan mutation -------------------------------------------------------------------
    def _is_write(self, tool: str) -> bool:
        spec = self.domain.tools.get(tool)
        return spec is None or not spec.read_only  # unknown tools count as state-changing (SPEC §1)

    def _parameter(self, tool: str, argument: str) -> dict[str, Any]:
        spec = self.domain.tools.get(tool)
        properties = (spec.parameters.get("properties") or {}) if spec else {}
        return properties.get(argument) or {}

    def _record_keys(self) -> dict[str, list[Any]]:
        """Single-column primary-key values per table from base data + the task's patch."""
        keys: dict[str, list[Any]] = {}
        for name, table in self.domain.tables.items():
            if len(table.primary_key) != 1:
                continue
            column = table.primary_key[0]
            rows = list(self.domain.base_data.get(name, [])) + list(self.task.data_patch.get(name, []))
            seen = {}
            for row in rows:
                if column in row and row[column] is not None:
                    seen[str(row[column])] = row[column]
            keys[name] = [seen[k] for k in sorted(seen)]
        return keys

    def _candidates(self, plan: list[GoldenCall], mode: str) -> list[tuple[int, str | None]]:
        """(plan index, argument) pairs where ``mode`` can be applied."""
        found: list[tuple[int, str | None]] = []
        record_keys = self._record_keys() if mode == "other_record" else {}
        for index, call in enumerate(plan):
            if not self._is_write(call.tool):
                continue
            if mode in ("skip_write", "give_up"):
                found.append((index, None))
            elif mode == "repeat_write":
                found.append((index, None))
            for argument, value in call.arguments.items():
                schema = self._parameter(call.tool, argument)
                if mode == "wrong_enum" and len(schema.get("enum") or []) >= 2:
                    found.append((index, argument))
                elif (
                    mode == "wrong_number" and isinstance(value, (int, float)) and not isinstance(value, bool)
                ):
                    found.append((index, argument))
                elif mode == "other_record" and isinstance(value, (str, int)) and not isinstance(value, bool):
                    if any(str(value) in map(str, keys) and len(keys) >= 2 for keys in record_keys.values()):
                        found.append((index, argument))
        if mode == "repeat_write":
            creations = [c for c in found if plan[c[0]].tool.lower().startswith(CREATION_PREFIXES)]
            found = creations or found
        return found

    def _mutate(self, plan: list[GoldenCall]) -> list[GoldenCall]:
        modes = dict(self.persona.failure_weights)
        plan = self._apply_one(plan, modes)
        if self.mutations and self.rng.random() < self.persona.second_mutation and not self.gave_up:
            modes.pop(self.mutations[-1].mode, None)
            plan = self._apply_one(plan, modes)
        return plan

    def _apply_one(self, plan: list[GoldenCall], modes: dict[str, float]) -> list[GoldenCall]:
        options = {mode: self._candidates(plan, mode) for mode in modes}
        usable = [mode for mode in sorted(options) if options[mode] and modes[mode] > 0]
        if not usable:
            return plan  # nothing state-changing to spoil: the attempt follows the plan
        mode = self.rng.choices(usable, weights=[modes[m] for m in usable])[0]
        index, argument = self.rng.choice(options[mode])
        call = plan[index]
        arguments = copy.deepcopy(dict(call.arguments))
        detail = call.tool
        if mode == "skip_write":
            plan = plan[:index] + plan[index + 1 :]
        elif mode == "give_up":
            self.gave_up = True
            plan = plan[:index]
        elif mode == "repeat_write":
            plan = plan[: index + 1] + [GoldenCall(call.tool, arguments)] + plan[index + 1 :]
        else:
            assert argument is not None  # _candidates names an argument for every value-changing mode
            old = arguments[argument]
            new = {
                "wrong_enum": self._other_enum_value,
                "wrong_number": self._perturbed_number,
                "other_record": self._other_record_key,
            }[mode](call.tool, argument, old)
            if new is None or new == old:
                return plan
            arguments[argument] = new
            plan = plan[:index] + [GoldenCall(call.tool, arguments)] + plan[index + 1 :]
            detail = f"{call.tool}.{argument}: {old!r} -> {new!r}"
        self.mutations.append(Mutation(mode, index, detail))
        return plan

    def _other_enum_value(self, tool: str, argument: str, old: Any) -> Any:
        choices = [v for v in self._parameter(tool, argument).get("enum", []) if v != old]
        return self.rng.choice(choices) if choices else None

    def _perturbed_number(self, tool: str, argument: str, old: Any) -> Any:
        schema = self._parameter(tool, argument)
        low, high = schema.get("minimum", -math.inf), schema.get("maximum", math.inf)
        if schema.get("type") == "integer" or (isinstance(old, int) and schema.get("type") != "number"):
            options = [old + d for d in (1, 2, -1) if low <= old + d <= high and old + d >= 0]
        else:
            options = [
                round(old * f, 2) for f in (0.5, 0.9, 1.1, 1.5, 2.0) if low <= round(old * f, 2) <= high
            ]
            options += [
                round(old + d, 2) for d in (10, -10) if low <= round(old + d, 2) <= high and old + d >= 0
            ]
        options = [v for v in options if v != old]
        return self.rng.choice(options) if options else None

    def _other_record_key(self, tool: str, argument: str, old: Any) -> Any:
        tables = [
            keys for keys in self._record_keys().values() if str(old) in map(str, keys) and len(keys) >= 2
        ]
        if not tables:
            return None
        # Prefer the table the argument is named after (ticket_id -> tickets).
        stem = argument.removesuffix("_id")
        named = [
            name for name, keys in self._record_keys().items() if name.startswith(stem) and keys in tables
        ]
        keys = self._record_keys()[named[0]] if named else tables[0]
        others = [k for k in keys if str(k) != str(old)]
        new = self.rng.choice(others)
        return type(old)(new) if isinstance(old, int) and str(new).lstrip("-").isdigit() else new

    def _add_lookup_noise(self, plan: list[GoldenCall]) -> list[GoldenCall]:
        reads = [c for c in plan if not self._is_write(c.tool)]
        if reads and self.rng.random() < self.persona.extra_lookup:
            return [GoldenCall(reads[0].tool, copy.deepcopy(dict(reads[0].arguments)))] + plan
        return plan

    # ---- stepping ------------------------------------------------------------------------
    def step(self, view: AgentView) -> AgentStep:
        """Next planned tool call, or the closing summary once the plan is exhausted."""
        issued = sum(len(m.tool_calls) for m in view.messages if m.role == "assistant")
        if issued < len(self.plan):
            call = self.plan[issued]
            text = self._lead_in(call, first=issued == 0)
            request = ToolCallRequest(
                id="call_" + hashlib.sha256(f"{self._salt}|{issued}".encode()).hexdigest()[:16],
                name=call.tool,
                arguments=copy.deepcopy(dict(call.arguments)),
            )
            return AgentStep(text=text, tool_calls=[request], usage=self._usage(view, text, [request]))
        text = self._closing()
        return AgentStep(text=text, done=True, usage=self._usage(view, text, []))

    def _lead_in(self, call: GoldenCall, *, first: bool) -> str:
        verb, subject = _split_tool(call.tool)
        action = f"{verb} the {subject}" if self._is_write(call.tool) else f"check the {subject}"
        if first:
            return self.rng.choice(
                [
                    f"Thanks for reaching out. Let me {action} first.",
                    f"I can help with that. First I'll {action}.",
                    f"Sure, let me take care of this. I'll start to {action}.",
                ]
            )
        if self.rng.random() < 0.5:
            return ""  # models often emit a bare tool call mid-task
        return self.rng.choice(
            [f"Next, I'll {action}.", f"Now let me {action}.", f"Got it. I'll {action} now."]
        )

    def _closing(self) -> str:
        if self.gave_up:
            return self.rng.choice(
                [
                    "I'm sorry, I wasn't able to complete this request. I've passed it on to a colleague "
                    "who can follow up with you.",
                    "I don't think I can safely finish this from here, so I'll stop and leave it for a "
                    "human agent to review.",
                ]
            )
        # Describes the intended writes, confident whatever happened: that is what makes a
        # clean-looking failure.
        actions = [_past_tense(*_split_tool(c.tool)) for c in self.task.golden if self._is_write(c.tool)]
        done = _join(list(dict.fromkeys(actions))) or "looked everything up"
        text = self.rng.choice(
            [
                f"All done! I've {done}. Everything is in order now.",
                f"Your request is complete: I {done}, as requested.",
                f"Great news, that's taken care of. I {done}.",
            ]
        )
        keywords = [w for words in (self.task.extra.get("rubric_keywords") or {}).values() for w in words]
        if keywords:
            text += " For your records: " + "; ".join(dict.fromkeys(keywords)) + "."
        return text + " Let me know if there is anything else I can do."

    def _usage(self, view: AgentView, text: str, calls: list[ToolCallRequest]) -> Usage:
        """Synthetic but plausible token counts (about four characters per token)."""
        schema_chars = sum(
            len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in view.tools
        )
        dialogue_chars = sum(_message_chars(m) for m in view.messages)
        input_tokens = (
            (len(view.system_prompt) + schema_chars + dialogue_chars) // 4 + 6 * len(view.messages) + 12
        )
        # Providers cache whole 128-token blocks of a repeated prefix; the first call is never cached.
        cached = 0
        if self._previous_input and self.rng.random() < 0.85:
            cached = (min(self._previous_input, input_tokens) // 128) * 128
        self._previous_input = input_tokens
        visible = len(text) // 4 + sum(14 + len(json.dumps(c.arguments)) // 4 for c in calls) + 2
        reasoning = int(visible * self.persona.reasoning_share * (0.6 + 0.8 * self.rng.random()))
        # Like the OpenAI API, output tokens include the reasoning tokens.
        return Usage(
            input_tokens=input_tokens,
            cached_input_tokens=cached,
            output_tokens=visible + reasoning,
            reasoning_tokens=reasoning,
            calls=1,
        )


def _message_chars(message: Message) -> int:
    calls = sum(len(c.name) + len(json.dumps(c.arguments, default=str)) for c in message.tool_calls)
    return len(message.content or "") + calls


def _split_tool(tool: str) -> tuple[str, str]:
    """("update", "ticket") from "update_ticket"; one-word tools read as ("run", "<tool> step")."""
    words = tool.replace("-", "_").split("_")
    if len(words) > 1:
        return words[0].lower(), " ".join(words[1:]).lower()
    return "run", f"{tool} step"


IRREGULAR_PAST = {
    "send": "sent",
    "get": "got",
    "make": "made",
    "hold": "held",
    "pay": "paid",
    "set": "set",
    "put": "put",
    "cancel": "cancelled",
    "submit": "submitted",
    "log": "logged",
    "flag": "flagged",
    "run": "ran",
    "freeze": "froze",
    "unfreeze": "unfroze",
    "rebook": "rebooked",
    "refund": "refunded",
}


def _past_tense(verb: str, subject: str) -> str:
    if verb in IRREGULAR_PAST:
        past = IRREGULAR_PAST[verb]
    elif verb.endswith("e"):
        past = verb + "d"
    elif verb.endswith("y") and len(verb) > 1 and verb[-2] not in "aeiou":
        past = verb[:-1] + "ied"
    else:
        past = verb + "ed"
    return f"{past} the {subject}"


def _join(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]
