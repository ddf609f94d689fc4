"""The seeded failure taxonomy (editable afterwards); digits 1-8 toggle these in the drilldown."""

from __future__ import annotations

SEED = (
    ("premature close", "Ended the conversation or closed the case before the work was done", False),
    ("wrong amount", "Refund, fee or transfer amount differs from policy", False),
    ("policy violation", "Acted against the domain policy", False),
    ("unrequested action", "Changed state the user did not ask for", False),
    ("missing documentation", "Did the work but did not record it (note, reason, log)", False),
    ("task ambiguous", "The query or policy allows more than one correct end state", True),
    ("grader bug", "The golden end state or a check is wrong", True),
    ("user-simulator error", "The simulated user misled the agent or broke character", False),
)


def seed_labels(label_model) -> None:
    """Create the seed labels that are missing (idempotent; takes the model so migrations pass their historical one)."""
    for position, (name, description, flags) in enumerate(SEED, start=1):
        label_model.objects.get_or_create(
            name=name,
            defaults={
                "description": description,
                "shortcut": position,
                "flags_task_health": flags,
                "position": position,
            },
        )
