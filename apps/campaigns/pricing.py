"""Price sheets in the database, loaded from the engine's dated starter sheet."""

from __future__ import annotations

from apps.campaigns.models import PriceSheet
from tb_engine.pricing import load_starter_price_sheet


def price_sheet_load_starter() -> PriceSheet:
    """Store the engine's starter price sheet (idempotent by name). Side effects: one PriceSheet row."""
    sheet = load_starter_price_sheet()
    data = sheet.to_dict()
    row, _ = PriceSheet.objects.update_or_create(
        name=f"{sheet.name} ({sheet.effective_date})",
        defaults={"source": sheet.source, "effective_date": sheet.effective_date, "prices": data["models"]},
    )
    return row
