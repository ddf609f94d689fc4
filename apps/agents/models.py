"""Agent configurations and price sheets.

Both tables were created by the campaigns app and keep their names (``campaigns_agentconfig``,
``campaigns_pricesheet``): the move to this app changed Django's state only (see
migrations/0001_initial.py), so existing databases keep every row and foreign key as they were.
"""

from __future__ import annotations

from django.db import models

from tb_engine.pricing import PriceList


class AgentConfig(models.Model):
    class Kind(models.TextChoices):
        GOLDEN = "golden", "Golden replay (harness self-check)"
        SIMULATED = "sim", "Simulated persona (not a model)"
        CHECK = "check", "Harness check (not a model, not a simulation)"
        OPENAI = "openai", "OpenAI-compatible endpoint"

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    persona = models.CharField(
        max_length=50,
        blank=True,
        help_text="For simulated agents: the persona; for harness checks: the check (e.g. do-nothing).",
    )
    model = models.CharField(max_length=200, blank=True)
    base_url = models.URLField(max_length=500, blank=True)
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="Name of the environment variable holding the key (never the key).",
    )
    parameters = models.JSONField(
        default=dict, blank=True, help_text="temperature, max_tokens, reasoning, headers…"
    )
    max_concurrency = models.PositiveIntegerField(
        default=256, help_text="Requests in flight to this agent's endpoint at once, across all workers."
    )
    # The team that owns the configuration: its operators edit it and its members see and use it.
    # None is shared (the built-in golden, simulated and harness-check agents, an administrator's):
    # everyone may use it, only administrators edit it.
    team = models.ForeignKey(
        "core.Team", null=True, blank=True, on_delete=models.PROTECT, related_name="agent_configs"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "campaigns_agentconfig"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def engine_spec(self) -> str:
        """The engine's agent spec string: golden, sim:<persona>, check:<kind> or openai."""
        if self.kind == self.Kind.SIMULATED:
            return f"sim:{self.persona}"
        if self.kind == self.Kind.CHECK:
            return f"check:{self.persona}"
        return self.kind

    @property
    def is_simulation(self) -> bool:
        """Not a model: the golden self-check, a harness check or a simulated persona."""
        return self.kind in (self.Kind.GOLDEN, self.Kind.SIMULATED, self.Kind.CHECK)

    @property
    def is_harness_check(self) -> bool:
        """Tests the grader, not a model: the golden replay or one of its deliberate variants."""
        return self.kind in (self.Kind.GOLDEN, self.Kind.CHECK)

    @property
    def badge_text(self) -> str:
        """The label this agent carries wherever it appears ('' for a model)."""
        if self.is_harness_check:
            return "harness check, not a model"
        if self.kind == self.Kind.SIMULATED:
            return "simulation, not a model"
        return ""

    @property
    def endpoint_key(self) -> str:
        """What per-endpoint concurrency caps are counted by."""
        return self.base_url or f"local:{self.kind}"


class PriceSheet(models.Model):
    """Prices per million tokens, per model: {"model": {"input":…, "cached_input":…, "output":…, "reasoning":…}}."""

    name = models.CharField(max_length=200, unique=True)
    source = models.CharField(max_length=500)
    effective_date = models.DateField()
    prices = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "campaigns_pricesheet"
        ordering = ["-effective_date", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.effective_date})"

    def as_price_list(self) -> PriceList:
        """The engine's price sheet for this row (what tb_engine.pricing.cost_of prices with)."""
        return PriceList.from_dict(
            {
                "name": self.name,
                "source": self.source,
                "effective_date": self.effective_date,
                "models": self.prices,
            },
            origin=f"price sheet {self.name}",
        )
