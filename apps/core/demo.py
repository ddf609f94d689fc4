"""The steps `manage.py demo` runs, in order. Other apps add theirs with @demo_step.

Example (in apps/suites/demo.py, imported from that app's AppConfig.ready()):

    @demo_step(order=20, name="load the built-in suite")
    def load_builtin_suite(context: DemoContext) -> None:
        ...
        context.notes.append("Suite: starter v1 (5 domains)")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from io import TextIOBase

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command

from apps.core.models import Team
from apps.core.roles import Role
from apps.core.services import assign_role

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo"
DEMO_TEAM_NAME = "Demo team"


@dataclass
class DemoContext:
    """What steps share: output stream and lines to print in the final summary."""

    out: TextIOBase  # the command's stdout (an OutputWrapper), or a StringIO in tests
    notes: list[str] = field(default_factory=list)
    options: dict = field(default_factory=dict)  # command-line options steps may read (e.g. repeat)
    shared: dict = field(default_factory=dict)  # steps may pass objects on (e.g. the demo team)


@dataclass(frozen=True)
class DemoStep:
    order: int
    name: str
    run: Callable[[DemoContext], None]


_STEPS: dict[str, DemoStep] = {}


def demo_step(*, order: int, name: str) -> Callable:
    """Register the decorated function as a demo step; steps run by ascending order."""

    def decorator(func: Callable[[DemoContext], None]) -> Callable[[DemoContext], None]:
        _STEPS[name] = DemoStep(order=order, name=name, run=func)
        return func

    return decorator


def demo_steps() -> list[DemoStep]:
    """Registered steps in the order they run."""
    return sorted(_STEPS.values(), key=lambda step: (step.order, step.name))


@demo_step(order=10, name="create the demo login")
def create_demo_login(context: DemoContext) -> None:
    """Demo user (admin role) in the demo team. Re-running resets the password, nothing else."""
    user_model = get_user_model()
    user, _ = user_model.objects.get_or_create(username=DEMO_USERNAME, defaults={"email": "demo@example.com"})
    user.set_password(DEMO_PASSWORD)
    user.is_staff = True  # lets the demo user open /admin/ too
    user.save()
    assign_role(user=user, role=Role.ADMIN)
    team, _ = Team.objects.get_or_create(name=DEMO_TEAM_NAME, defaults={"slug": "demo"})
    team.members.add(user)
    context.shared["demo_user"] = user
    context.shared["demo_team"] = team
    context.notes.append(f"Login: {DEMO_USERNAME} / {DEMO_PASSWORD} (admin role, team '{DEMO_TEAM_NAME}')")


PERSONAS_FIXTURE = settings.BASE_DIR / "fixtures" / "personas.json"


@demo_step(order=15, name="load the personas (alice, bob, trish, charlie, erin)")
def load_personas(context: DemoContext) -> None:
    """Users for trying roles and team visibility; loading twice updates instead of duplicating."""
    # The fixture names role groups by natural key; make sure they exist even on a database whose
    # data-migration rows were flushed (transactional tests do that).
    for role in Role:
        Group.objects.get_or_create(name=role.value)
    call_command("loaddata", str(PERSONAS_FIXTURE), verbosity=0)
    context.notes.append(
        "Personas (password <name>-pw): alice operator, bob viewer, trish triager in Team A; "
        "erin viewer in Team B; charlie no role"
    )
