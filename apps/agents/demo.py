"""Demo step: the dated starter price sheet and an illustrative sheet for the simulated personas."""

from __future__ import annotations

from datetime import date

from apps.agents.models import PriceSheet
from apps.agents.services import price_sheet_load_starter
from apps.core.demo import DemoContext, demo_step

# Simulated personas cost nothing to run; for cost pages to read naturally the demo prices their
# synthetic tokens like real models of similar profile. The sheet says so wherever it is shown.
DEMO_PERSONA_PRICES = {
    "sim-steady": {"input": "2.00", "cached_input": "0.50", "output": "8.00"},
    "sim-explorer": {"input": "1.10", "cached_input": "0.275", "output": "4.40"},
    "sim-careless": {"input": "0.15", "cached_input": "0.075", "output": "0.60"},
    "sim-cautious": {"input": "1.00", "cached_input": "0.10", "output": "5.00"},
}


@demo_step(order=30, name="load price sheets")
def load_price_sheets(context: DemoContext) -> None:
    starter = price_sheet_load_starter()
    demo_sheet, _ = PriceSheet.objects.update_or_create(
        name="Demo: simulated personas at illustrative prices",
        defaults={
            "source": f"Illustrative only: simulated personas are not models; their synthetic tokens are priced like "
            f"models of similar profile from '{starter.name}'",
            "effective_date": starter.effective_date or date.today(),
            "prices": {**starter.prices, **DEMO_PERSONA_PRICES},
        },
    )
    context.shared["demo_price_sheet"] = demo_sheet
