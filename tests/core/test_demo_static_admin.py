"""`manage.py demo`, static assets (htmx and the plotly.js cartesian bundle vendored) and admin coverage."""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.staticfiles import finders
from django.core.management import CommandError, call_command

from apps.core import demo as demo_module
from apps.core.access import roles_of, user_has_role
from apps.core.demo import DemoContext, demo_step, demo_steps

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_demo_no_serve_creates_working_login(client, settings):
    settings.DEBUG = True
    out = io.StringIO()
    call_command("demo", "--no-serve", "--no-campaigns", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines == [
        "[1/6] create the demo login",
        "[2/6] load the personas (alice, bob, trish, charlie, erin)",
        "[3/6] load the built-in five-domain suite",
        "[4/6] load price sheets",
        "[5/6] run the demo campaigns (golden + 4 simulated personas) on the worker pool",
        "[6/6] calibrate the starter suite on the demo campaigns",
        "Demo ready.",
        "URL: http://127.0.0.1:8000/",
        "Login: demo / demo (admin role, team 'Demo team')",
        "Personas (password <name>-pw): alice operator, bob viewer, trish triager in Team A; "
        "erin viewer in Team B; charlie no role",
        "Suite: starter v1.0, 56 tasks in 5 domains (56 valid)",
        "Demo campaigns: skipped (--no-campaigns)",
    ]
    assert client.login(username="demo", password="demo") is True
    assert client.get("/", follow=True).status_code == 200


@pytest.mark.django_db
def test_demo_twice_keeps_one_user_with_admin_role(settings, django_user_model):
    settings.DEBUG = True
    call_command("demo", "--no-serve", "--no-campaigns", stdout=io.StringIO())
    call_command("demo", "--no-serve", "--no-campaigns", stdout=io.StringIO())
    user = django_user_model.objects.get(username="demo")
    assert django_user_model.objects.count() == 6  # demo + five personas, none duplicated
    assert user_has_role(user, "admin") is True
    assert [team.name for team in user.teams.all()] == ["Demo team"]


@pytest.mark.django_db
def test_demo_refuses_without_debug(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError):
        call_command("demo", "--no-serve", stdout=io.StringIO())


def test_demo_step_registration_orders_by_order(monkeypatch):
    monkeypatch.setattr(demo_module, "_STEPS", dict(demo_module._STEPS))

    @demo_step(order=99, name="later step")
    def later(context: DemoContext) -> None:
        context.notes.append("later")

    @demo_step(order=12, name="middle step")
    def middle(context: DemoContext) -> None:
        context.notes.append("middle")

    assert [step.name for step in demo_steps()][:3] == [
        "create the demo login",
        "middle step",
        "load the personas (alice, bob, trish, charlie, erin)",
    ]
    assert [step.name for step in demo_steps()][-1] == "later step"


def test_only_plotly_js_cartesian_bundle_is_vendored_with_its_gzip_and_licence():
    vendor = PROJECT_ROOT / "static" / "vendor" / "plotly"
    bundle = vendor / "plotly-cartesian-4.1.1.min.js"
    # The partial bundle (scatter, bar, heatmap, ...), not the 4.8 MB full one.
    assert sorted(path.name for path in PROJECT_ROOT.joinpath("static").rglob("plotly*.js*")) == [
        "plotly-cartesian-4.1.1.min.js",
        "plotly-cartesian-4.1.1.min.js.gz",
    ]
    assert finders.find("vendor/plotly/plotly-cartesian-4.1.1.min.js") == str(bundle)
    assert bundle.read_text().startswith("/**\n* plotly.js (cartesian - minified) v4.1.1")
    # WhiteNoise serves the .gz to clients that accept gzip: it must be the same file.
    assert gzip.decompress((vendor / "plotly-cartesian-4.1.1.min.js.gz").read_bytes()) == bundle.read_bytes()
    assert (vendor / "LICENSE").read_text().startswith("MIT License")


def test_every_chart_trace_type_is_in_the_cartesian_bundle():
    """The charts are plain dicts in apps/*/charts.py; a trace type outside the bundle would draw nothing."""
    cartesian = {"bar", "box", "contour", "heatmap", "histogram", "histogram2d", "histogram2dcontour"}
    cartesian |= {"image", "pie", "scatter", "scatterternary", "violin"}
    # Every plotly.js trace type the full bundle has beyond those (plotly.js 4.1 `lib/index.js`).
    others = {"scattergl", "splom", "pointcloud", "heatmapgl", "parcoords", "parcats", "scatter3d", "surface"}
    others |= {
        "isosurface",
        "volume",
        "mesh3d",
        "cone",
        "streamtube",
        "scattergeo",
        "choropleth",
        "scattermap",
    }
    others |= {"choroplethmap", "densitymap", "scatterpolar", "scatterpolargl", "barpolar", "sankey", "table"}
    others |= {
        "funnel",
        "funnelarea",
        "indicator",
        "treemap",
        "sunburst",
        "icicle",
        "waterfall",
        "candlestick",
    }
    others |= {"ohlc", "carpet", "scattercarpet", "contourcarpet", "scattersmith", "histogram2dgl"}
    trace_types = set()
    for charts in PROJECT_ROOT.joinpath("apps").glob("*/charts.py"):
        trace_types |= set(re.findall(r'"type": "(\w+)"', charts.read_text())) & (cartesian | others)
    assert trace_types == {"bar", "heatmap", "scatter"}
    assert trace_types <= cartesian


def test_htmx_vendored_with_licence():
    vendor = PROJECT_ROOT / "static" / "vendor" / "htmx"
    assert finders.find("vendor/htmx/htmx.min.js") == str(vendor / "htmx.min.js")
    assert (vendor / "LICENSE").read_text().startswith("Zero-Clause BSD")


def test_every_project_model_is_registered_in_admin():
    project_models = [model for model in apps.get_models() if model.__module__.startswith("apps.")]
    assert project_models
    assert [model.__name__ for model in project_models if not admin.site.is_registered(model)] == []


@pytest.mark.django_db
@pytest.mark.parametrize("model_path", ["core/team", "core/workerheartbeat"])
def test_admin_changelist_renders_for_superuser(admin_client, model_path):
    response = admin_client.get(f"/admin/{model_path}/")
    assert response.status_code == 200


@pytest.mark.django_db
def test_personas_fixture_gives_documented_roles_and_teams(client, django_user_model):
    call_command("loaddata", "personas", verbosity=0)
    call_command("loaddata", "personas", verbosity=0)  # twice: updates, no duplicates
    users = {user.username: user for user in django_user_model.objects.all()}
    summary = {
        name: ([role.value for role in roles_of(user)][-1:], sorted(team.slug for team in user.teams.all()))
        for name, user in users.items()
    }
    assert summary == {
        "alice": (["operator"], ["team-a"]),
        "bob": (["viewer"], ["team-a"]),
        "trish": (["triager"], ["team-a"]),
        "erin": (["viewer"], ["team-b"]),
        "charlie": ([], []),
    }
    assert client.login(username="alice", password="alice-pw") is True
