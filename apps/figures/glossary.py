"""Plain-language definitions of every figure the dashboard and the exports show.

One place, so the glossary page, the popovers on metric headers and the About sheet of every export
say the same thing. Definitions are written for the people who choose a model, not for the people
who wrote the estimators: no section numbers, no formulas a reader has to decode.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    slug: str  # the anchor on the glossary page (#slug)
    name: str
    definition: str


TERMS: tuple[Term, ...] = (
    Term(
        "attempt",
        "Attempt",
        "One run of the agent on one task, graded on the database state it leaves behind.",
    ),
    Term("n", "N", "How many times each task was attempted in a campaign."),
    Term(
        "pass1",
        "pass@1",
        "The chance that a single attempt solves a task, averaged over tasks. "
        "The bracket is a 95% interval from resampling tasks.",
    ),
    Term("passk", "pass@k", "The chance that at least one of k attempts solves a task, averaged over tasks."),
    Term(
        "passn",
        "pass@N",
        "The chance that at least one of N attempts solves a task, averaged over tasks.",
    ),
    Term(
        "hatk",
        "pass^k",
        "The chance that k attempts in a row all solve a task, averaged over tasks: how dependable the agent "
        "is when it is asked the same thing k times.",
    ),
    Term(
        "observed",
        "pass@N observed",
        "Share of tasks solved at least once in N attempts: what the agent can do at all.",
    ),
    Term(
        "alln",
        "all-N (dependable)",
        "Tasks solved in every one of the N attempts. A dependable task is one the agent never gets wrong "
        "here; the leaderboard ranks by this figure first.",
    ),
    Term(
        "gap",
        "Gap",
        "pass@N observed minus all-N, in percentage points: tasks the agent can solve but not every time.",
    ),
    Term("tokens", "Tokens per attempt", "Mean agent tokens (input plus output) per billed attempt."),
    Term("cost_attempt", "$ per attempt", "Agent cost divided by the number of billed attempts."),
    Term("cost_success", "$ per success", "Agent cost divided by the number of passing attempts."),
    Term(
        "cost_dependable",
        "$ per dependable task",
        "Agent cost divided by the number of dependable (all-N) tasks; a dash when no task is dependable.",
    ),
    Term(
        "coverage",
        "Coverage",
        "Attempts that could not be graded because the harness failed (infra errors), and tasks with fewer "
        "than N graded attempts (incomplete).",
    ),
    Term(
        "rank",
        "Rank and ties",
        "Campaigns share a rank (=) when the difference between them is smaller than the noise floor: the "
        "smallest difference this many tasks and attempts can tell apart from chance.",
    ),
    Term(
        "noise",
        "Noise floor",
        "The smallest difference between two campaigns that their tasks and attempts can detect reliably "
        "(95% confidence, 80% power). Smaller differences are reported as ties.",
    ),
    Term(
        "harness",
        "Harness self-check",
        "The golden run replays each task's reference solution. It should solve every task; if it does not, "
        "the task or the harness is broken, not the model. It is shown above the ranking, never ranked.",
    ),
    Term(
        "clean",
        "Clean-looking failure",
        "A failed attempt that ended normally, changed the database, and whose last tool call raised no "
        "error: it looks fine from the transcript alone, so only the state diff shows what went wrong.",
    ),
    Term(
        "diff",
        "State diff",
        "Rows and fields where the database the attempt left differs from the one the golden run left: a "
        "missing effect, an extra effect or a wrong value.",
    ),
    Term("reversal", "Reversal", "Two campaigns that pass@N observed and all-N rank in opposite order."),
    Term(
        "recovery-rate",
        "Recovery rate",
        "In a campaign run under a fault plan: of the attempts in which a given kind of backend fault "
        "fired, the share that still left the database right. The bracket is a 95% interval over those "
        "attempts. Attempts in which no planned fault fired are counted apart.",
    ),
    Term(
        "duplicate-effect-rate",
        "Duplicate-effect rate",
        "Of the attempts in which a write succeeded but its reply was lost (an error or timeout after "
        "commit) or was delivered twice, the share whose database holds an extra effect of that call or "
        "of its retry: a second refund, a duplicate ticket.",
    ),
    Term(
        "price_sheet",
        "Price sheet",
        "The per-token prices used to turn token counts into dollars; every cost names its sheet.",
    ),
)

BY_SLUG: dict[str, Term] = {term.slug: term for term in TERMS}


def definition(slug: str) -> str:
    """The plain definition of a glossary term (KeyError for an unknown slug: a typo in a template)."""
    return BY_SLUG[slug].definition
