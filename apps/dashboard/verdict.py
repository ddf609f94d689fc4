"""The compare page's verdict sentence, shared with the procurement workbook's comparison sheet."""

from __future__ import annotations

from apps.figures import selectors as figures


def compare_verdict(result: figures.Comparison, *, a: str, b: str, cost_a, cost_b) -> str:
    """One plain sentence on the comparison: which campaign is more dependable, whether the difference
    clears the noise floor, and what each dependable task costs."""
    delta = result.delta_all_n
    gained, lost = len(result.gained), len(result.lost)
    if delta.clears is None:
        head = f"Too few shared tasks ({result.tasks}) to tell whether {a} and {b} really differ"
    elif delta.clears:
        better, worse = (a, b) if (delta.value or 0) > 0 else (b, a)
        head = (
            f"{better} is more dependable than {worse}: {abs(delta.value or 0) * 100:.1f} points more tasks "
            f"solved every time ({gained} gained, {lost} lost), beyond the noise floor"
        )
    else:
        head = (
            f"No real difference in dependability between {a} and {b}: the all-N difference "
            f"({(delta.value or 0) * 100:+.1f} points) is below the noise floor ({(delta.mdd or 0) * 100:.1f} points)"
        )
    price_a, price_b = cost_a.cost_per_dependable_task, cost_b.cost_per_dependable_task
    if price_a is not None and price_b is not None:
        tail = f"; a dependable task costs ${price_a:.4f} with {a} and ${price_b:.4f} with {b}."
    else:
        tail = "."
    return head + tail
