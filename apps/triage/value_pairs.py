"""Value-pair sub-groups of failure clusters (issue 30).

A signature leaves values out, so "set ticket status via update_ticket to a value other than
golden's" holds both "solved where golden has hold" (the ticket closed while the carrier's
exception is still open) and "hold where golden has solved" — opposite mistakes. The stored
signature forms (SignatureVariant: the elements' phrases with one attempt's values) keep the
values; here the attempts of a cluster are split by the phrases that differ between its forms,
so each (result, golden) pair is a sub-group of its own with its count and a link to its attempts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Min, QuerySet

from apps.attempts.models import Attempt, AttemptSignature
from apps.attempts.selectors.clusters import signature_forms, signature_rows_of

SHOWN = 4  # sub-groups listed in a grouped-queue row (the cluster page lists every one)


@dataclass(frozen=True)
class PairGroup:
    """Attempts of one cluster whose differing phrases (values included) are the same."""

    phrases: tuple[str, ...]  # the phrases that differ between the cluster's forms, with values
    size: int
    variants: tuple[int, ...]  # SignatureVariant pks (the queue's ?v= filter)
    example: int  # the smallest attempt id

    @property
    def text(self) -> str:
        return "; ".join(self.phrases)


@dataclass(frozen=True)
class ValuePairs:
    """A cluster's sub-groups, largest first (empty when every attempt shares the values)."""

    groups: tuple[PairGroup, ...]

    @property
    def splits(self) -> bool:
        return len(self.groups) > 1

    @property
    def shown(self) -> tuple[PairGroup, ...]:
        return self.groups[:SHOWN]

    @property
    def more(self) -> int:
        return max(0, len(self.groups) - SHOWN)


def value_pairs(attempts: QuerySet[Attempt], *, signatures: Iterable[str]) -> dict[str, ValuePairs]:
    """Per signature, the value-pair sub-groups of those of `attempts` that carry it (two queries)."""
    wanted = list(signatures)
    if not wanted:
        return {}
    return value_pairs_of_rows(signature_rows_of(attempts), signatures=wanted)


def value_pairs_of_rows(
    rows: QuerySet[AttemptSignature], *, signatures: Iterable[str]
) -> dict[str, ValuePairs]:
    """value_pairs over signature rows already narrowed to the scope (campaigns, clean-looking, tasks):
    no join with the attempt heap, the (digest, campaign) index answers it (two queries)."""
    return value_pairs_of_forms(signature_form_counts(rows, signatures=signatures))


def signature_form_counts(
    rows: QuerySet[AttemptSignature], *, signatures: Iterable[str]
) -> dict[str, list[tuple[int, int, int]]]:
    """Per signature, its stored forms among the rows: (variant pk, attempts, smallest attempt id) (one query).

    What value_pairs_of_forms groups, and — its length — a cluster's number of phrase variants.
    """
    wanted = list(signatures)
    if not wanted:
        return {}
    counts = (
        rows.filter(digest__in=wanted)
        .order_by()
        .values("digest", "variant_id")
        .annotate(size=Count("attempt_id"), first=Min("attempt_id"))
    )
    by_signature: dict[str, list[tuple[int, int, int]]] = {}
    for row in counts:
        by_signature.setdefault(row["digest"], []).append((row["variant_id"], row["size"], row["first"]))
    return by_signature


def value_pairs_of_forms(by_signature: dict[str, list[tuple[int, int, int]]]) -> dict[str, ValuePairs]:
    """The value-pair sub-groups of signature_form_counts' forms (one query: the forms' items)."""
    if not by_signature:
        return {}
    forms = signature_forms([variant for rows in by_signature.values() for variant, _, _ in rows])
    return {signature: _groups(found, forms) for signature, found in by_signature.items()}


def _groups(rows: list[tuple[int, int, int]], forms: dict[int, list]) -> ValuePairs:
    if len(rows) < 2:
        return ValuePairs(())
    phrases = {
        variant: [str(item[4]) if len(item) > 4 else "" for item in forms.get(variant, [])]
        for variant, _, _ in rows
    }
    width = max(len(p) for p in phrases.values())
    differing = [
        position
        for position in range(width)
        if len({p[position] if position < len(p) else "" for p in phrases.values()}) > 1
    ]
    merged: dict[tuple[str, ...], list[tuple[int, int, int]]] = {}
    for variant, size, first in rows:
        key = tuple(phrases[variant][i] if i < len(phrases[variant]) else "" for i in differing)
        merged.setdefault(key, []).append((variant, size, first))
    groups = [
        PairGroup(
            phrases=tuple(p for p in key if p),
            size=sum(size for _, size, _ in members),
            variants=tuple(sorted(variant for variant, _, _ in members)),
            example=min(first for _, _, first in members),
        )
        for key, members in merged.items()
    ]
    groups.sort(key=lambda g: (-g.size, g.text))
    return ValuePairs(tuple(groups))
