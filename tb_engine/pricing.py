"""Price sheets and the cost of token usage.

A price sheet (a YAML file, or the Django side's stored ``PriceSheet`` row) parses into a
``PriceList``: per model, USD prices per million tokens for input, cached input, output and
reasoning tokens, with the sheet's name, source and effective date (shown wherever cost is,
SPEC §5). Token semantics follow the
OpenAI usage block, which ``tb_engine.llm`` reproduces: ``input_tokens``
*includes* the cached ones and ``output_tokens`` *includes* the reasoning ones,
so each token is billed once at its own price:

    cost = (input - cached) * input + cached * cached_input
         + (output - reasoning) * output + reasoning * reasoning

A missing cached-input price bills cached tokens at the input price; a missing
reasoning price bills them at the output price (how OpenAI bills them). A model
the sheet does not list is *unpriced*: ``cost_of`` returns None, never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml

from tb_engine.transcript import Transcript, Usage

STARTER_SHEET_PATH = Path(__file__).parent / "data" / "price_sheet_starter.yaml"
_MILLION = Decimal(1_000_000)


class PriceSheetError(ValueError):
    """A price sheet file or mapping is malformed."""


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens for one model."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None
    reasoning: Decimal | None = None
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class PriceList:
    """The validated prices of one price sheet (``from_dict`` checks every field)."""

    name: str
    source: str
    effective_date: date
    currency: str = "USD"
    models: dict[str, ModelPrice] = field(default_factory=dict)

    def price_for(self, model: str) -> ModelPrice | None:
        """The prices of ``model`` by exact name or alias (case-insensitive); None when unpriced."""
        wanted = model.strip().lower()
        for name, price in self.models.items():
            if wanted == name.lower() or wanted in (alias.lower() for alias in price.aliases):
                return price
        return None

    @classmethod
    def from_dict(cls, data: Any, *, origin: str = "price sheet") -> PriceList:
        """Build from a parsed YAML/JSON mapping, naming the offending field on bad input."""
        if not isinstance(data, dict):
            raise PriceSheetError(f"{origin}: must be a mapping")
        for required in ("name", "source", "effective_date", "models"):
            if required not in data:
                raise PriceSheetError(f"{origin}: {required}: missing")
        try:
            effective = data["effective_date"]
            effective = effective if isinstance(effective, date) else date.fromisoformat(str(effective))
        except ValueError as exc:
            raise PriceSheetError(
                f"{origin}: effective_date: not an ISO date ({data['effective_date']!r})"
            ) from exc
        if not isinstance(data["models"], dict) or not data["models"]:
            raise PriceSheetError(f"{origin}: models: must be a non-empty mapping of model name -> prices")
        models = {
            str(name): _model_price(entry, f"{origin}: models.{name}")
            for name, entry in data["models"].items()
        }
        return cls(
            name=str(data["name"]),
            source=str(data["source"]),
            effective_date=effective,
            currency=str(data.get("currency", "USD")),
            models=models,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (prices as strings, so Decimals survive a round trip)."""
        return {
            "name": self.name,
            "source": self.source,
            "effective_date": self.effective_date.isoformat(),
            "currency": self.currency,
            "models": {
                name: {
                    key: (str(value) if isinstance(value, Decimal) else list(value))
                    for key, value in (
                        ("input", p.input),
                        ("cached_input", p.cached_input),
                        ("output", p.output),
                        ("reasoning", p.reasoning),
                        ("aliases", p.aliases),
                    )
                    if value is not None and value != ()
                }
                for name, p in self.models.items()
            },
        }


def _decimal(value: Any, where: str) -> Decimal:
    if isinstance(value, bool):
        raise PriceSheetError(f"{where}: must be a number, got {value!r}")
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError) as exc:
        raise PriceSheetError(f"{where}: must be a number, got {value!r}") from exc
    if not number.is_finite() or number < 0:
        raise PriceSheetError(f"{where}: must be a finite number >= 0, got {value!r}")
    return number


def _model_price(entry: Any, where: str) -> ModelPrice:
    if not isinstance(entry, dict):
        raise PriceSheetError(f"{where}: must be a mapping with input and output prices")
    unknown = sorted(set(entry) - {"input", "cached_input", "output", "reasoning", "aliases", "note"})
    if unknown:
        raise PriceSheetError(f"{where}: unknown field(s): {', '.join(unknown)}")
    for required in ("input", "output"):
        if entry.get(required) is None:
            raise PriceSheetError(f"{where}.{required}: missing")
    aliases = entry.get("aliases") or []
    if not isinstance(aliases, list):
        raise PriceSheetError(f"{where}.aliases: must be a list of names")
    return ModelPrice(
        input=_decimal(entry["input"], f"{where}.input"),
        output=_decimal(entry["output"], f"{where}.output"),
        cached_input=None
        if entry.get("cached_input") is None
        else _decimal(entry["cached_input"], f"{where}.cached_input"),
        reasoning=None
        if entry.get("reasoning") is None
        else _decimal(entry["reasoning"], f"{where}.reasoning"),
        aliases=tuple(str(a) for a in aliases),
    )


def load_price_sheet(path: str | Path) -> PriceList:
    """Load a price sheet from a YAML file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise PriceSheetError(f"{path}: not valid YAML: {exc}") from exc
    return PriceList.from_dict(data, origin=str(path))


def load_starter_price_sheet() -> PriceList:
    """The shipped, user-editable starter sheet (prices must be checked before use)."""
    return load_price_sheet(STARTER_SHEET_PATH)


def cost_of(usage: Usage, model: str, sheet: PriceList) -> Decimal | None:
    """USD cost of ``usage`` on ``model`` under ``sheet``; None when the model is unpriced (never zero)."""
    price = sheet.price_for(model)
    if price is None:
        return None
    cached = min(usage.cached_input_tokens, usage.input_tokens)
    reasoning = min(usage.reasoning_tokens, usage.output_tokens)
    cached_price = price.cached_input if price.cached_input is not None else price.input
    reasoning_price = price.reasoning if price.reasoning is not None else price.output
    total = (
        Decimal(usage.input_tokens - cached) * price.input
        + Decimal(cached) * cached_price
        + Decimal(usage.output_tokens - reasoning) * price.output
        + Decimal(reasoning) * reasoning_price
    )
    return total / _MILLION


@dataclass(frozen=True)
class AttemptCost:
    """An attempt's cost split as SPEC §5 reports it: agent cost apart from evaluation overhead."""

    agent: Decimal | None
    user: Decimal | None
    judge: Decimal | None

    @property
    def overhead(self) -> Decimal | None:
        """User simulator + judge cost; None when either used tokens on an unpriced model."""
        if self.user is None or self.judge is None:
            return None
        return self.user + self.judge


def attempt_cost(
    transcript: Transcript,
    *,
    agent_model: str | None,
    user_model: str | None,
    judge_model: str | None,
    sheet: PriceList | None,
) -> AttemptCost:
    """Price a transcript's three usages. A role that used no tokens costs exactly 0 whatever its
    model; one that did is unpriced (None) without a sheet, without a model name, or when the sheet
    does not list its model."""

    def price(usage: Usage, model: str | None) -> Decimal | None:
        if usage.total_tokens == 0:
            return Decimal(0)
        if sheet is None or not model:
            return None
        return cost_of(usage, model, sheet)

    return AttemptCost(
        agent=price(transcript.agent_usage, agent_model),
        user=price(transcript.user_usage, user_model),
        judge=price(transcript.judge_usage, judge_model),
    )
