"""Every URL pattern, rendered with demo-like data as every persona in real headless Chromium.

No page may answer 5xx and no page may log a console error or throw. The sample paths are made
from the URL patterns themselves (the site root's resolver, admin included): a pattern that gets
no sample path fails the test, so a new page is covered the day it lands. Each persona walks
every page in one Chromium (one browser, one page per persona); HTML pages are also fetched as
htmx fragments, and every non-admin path takes an empty POST (bad input must not be a 500 either).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.smoke.demo_data import build_demo_data
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CONVERTER = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")
# Chromium reports a page's own 4xx status as a console message; that is the answer under test
# (403 for a missing role, 404 for another team's object, 405 for GET on a POST-only action).
OWN_STATUS = re.compile(r"^Failed to load resource: the server responded with a status of (\d{3})")


def walk(patterns, prefix: str = "", namespace: str = ""):
    """(route, qualified name or '', pattern) for every URL pattern under the resolver, includes flattened."""
    from django.urls import URLResolver

    for entry in patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}:{entry.namespace}" if namespace and entry.namespace else entry.namespace
            yield from walk(entry.url_patterns, prefix + str(entry.pattern), inner or namespace)
        else:
            name = f"{namespace}:{entry.name}" if namespace and entry.name else (entry.name or "")
            yield prefix + str(entry.pattern), name, entry


def fill(route: str, values: dict) -> str:
    """The route with each <converter:name> replaced by values[name]."""
    return "/" + CONVERTER.sub(lambda match: str(values[match["name"]]), route)


def _q(**params) -> str:
    pairs = [(k, v) for k, many in params.items() for v in (many if isinstance(many, list) else [many])]
    return "?" + urlencode(pairs)


def admin_samples(route: str, name: str, entry) -> list[str] | None:
    """Paths for the admin site's patterns: every model's list, add, change, history and delete page."""
    from django.contrib import admin
    from django.urls.resolvers import RegexPattern

    if not route.startswith("admin/"):
        return None
    if isinstance(entry.pattern, RegexPattern):
        if name == "admin:app_list":
            labels = sorted({model._meta.app_label for model in admin.site._registry})
            return [f"/admin/{label}/" for label in labels]
        return ["/admin/no/such/page/"]  # the catch-all (final_catch_all_view)
    for model in admin.site._registry:
        base = f"admin/{model._meta.app_label}/{model._meta.model_name}/"
        if route.startswith(base):
            row = model._default_manager.order_by("pk").first()
            assert row is not None, f"demo data has no {model.__name__} row for {route}"
            return [fill(route, {"object_id": row.pk, "id": row.pk})]
    if name == "admin:logout":
        return [("action", "/admin/logout/")]
    if name == "admin:view_on_site":
        from django.contrib.contenttypes.models import ContentType

        from apps.campaigns.models import Campaign

        content_type = ContentType.objects.get_for_model(Campaign)
        return [fill(route, {"content_type_id": content_type.pk, "object_id": Campaign.objects.first().pk})]
    return [fill(route, {})]


def sample_paths(data) -> dict[str, list[tuple[str, str]]]:
    """Route -> [(kind, path)]: a 'page' opens in Chromium; a 'file' (download) and an 'action' (POST only)
    are fetched through the browser context, and actions take a POST afterwards."""
    from django.urls import get_resolver

    from apps.exports.selectors import ATTEMPT_FORMATS, TABLE_FORMATS, TABLES
    from apps.figures.selectors import TASK_FILTERS

    c = data.campaigns
    golden, careless, steady = c["golden"].pk, c["sim:careless"].pk, c["sim:steady"].pk
    campaign_pages = [c[key].pk for key in ("sim:careless", "running", "cancelled", "draft", "down", "tb")]
    tb_attempt = c["tb"].attempts.order_by("pk").first()
    tables = [
        ("file", fill("exports/tables/<name>.<fmt>", {"name": t, "fmt": f}))
        for t in TABLES
        for f in TABLE_FORMATS
    ]
    table_query = _q(c=[golden, careless], a=steady, b=careless, domain="retail")
    by_name: dict[str, list[tuple[str, str]]] = {
        "login": [("page", "/accounts/login/")],
        "logout": [("action", "/accounts/logout/")],
        "password_change": [("page", "/accounts/password/")],
        "password_change_done": [("page", "/accounts/password/done/")],
        "core:home": [("page", "/")],
        "core:healthz": [("page", "/healthz")],
        "core:favicon": [("file", "/favicon.ico")],
        "core:workers": [("page", "/system/workers/")],
        "core:ping_workers": [("action", "/system/workers/ping/")],
        "campaigns:list": [("page", "/campaigns/")],
        "agents:list": [("page", "/agents/")],
        "agents:create": [("page", "/agents/new/")],
        "agents:detail": [
            ("page", f"/agents/{data.agent.pk}/"),
            ("page", f"/agents/{c['down'].agent_id}/"),
        ],
        "agents:test": [("action", f"/agents/{c['down'].agent_id}/test/")],
        "agents:price_sheets": [("page", "/price-sheets/")],
        "agents:price_sheet_new": [("page", "/price-sheets/new/")],
        "agents:price_sheet": [("page", f"/price-sheets/{data.price_sheet.pk}/")],
        "campaigns:launch": [
            ("page", "/campaigns/new/"),
            ("page", f"/campaigns/new/?agent=pk:{data.agent.pk}"),
        ],
        "campaigns:detail": [("page", f"/campaigns/{pk}/") for pk in campaign_pages]
        + [("page", f"/campaigns/{c['team_b'].pk}/"), ("page", f"/campaigns/{c['faulted'].pk}/")],
        "campaigns:cancel": [("action", f"/campaigns/{careless}/cancel/")],
        "campaigns:resume": [("action", f"/campaigns/{careless}/resume/")],
        "dashboard:leaderboard": [
            ("page", "/leaderboard/"),
            ("page", "/leaderboard/" + _q(preset="robustness")),
            ("page", "/leaderboard/" + _q(domain="retail", sort="name", healthy="exclude")),
        ],
        "dashboard:external_score_add": [("action", "/leaderboard/scores/")],
        "dashboard:glossary": [("page", "/glossary/")],
        "dashboard:gap": [("page", "/gap/"), ("page", "/gap/" + _q(c=[golden, careless]))],
        "dashboard:cost": [("page", "/cost/")],
        "dashboard:domains": [("page", "/domains/"), ("page", "/domains/" + _q(a=steady, b=careless))],
        "dashboard:tasks": [("page", "/tasks/")]
        + [("page", "/tasks/" + _q(filter=kind)) for kind in TASK_FILTERS if kind],
        "dashboard:task": [("page", f"/tasks/{data.task.pk}/"), ("page", f"/tasks/{tb_attempt.task_id}/")],
        "dashboard:compare": [("page", "/compare/"), ("page", "/compare/" + _q(a=steady, b=careless))],
        "dashboard:decide": [("page", "/decide/"), ("page", "/decide/?target=50&budget=100")],
        "dashboard:attempt": [
            ("page", f"/attempts/{data.failed_attempt.pk}/"),
            ("page", f"/attempts/{data.attempt.pk}/"),
            ("page", f"/attempts/{tb_attempt.pk}/"),
            ("page", f"/attempts/{c['down'].attempts.first().pk}/"),
            ("page", f"/attempts/{c['faulted'].attempts.order_by('pk').first().pk}/"),
        ],
        "dashboard:attempt_raw": [("page", f"/attempts/{data.failed_attempt.pk}/raw.json")],
        "exports:table": [(kind, path + table_query) for kind, path in tables],
        "exports:procurement": [
            ("page", "/exports/procurement/"),
            ("page", "/exports/procurement/" + _q(c=[steady, careless])),
            ("file", "/exports/procurement/" + _q(c=[steady, careless], download=1)),
        ],
        "exports:attempts": [
            ("file", f"/exports/attempts.{fmt}" + _q(c=[careless, c["down"].pk, c["tb"].pk], result=1))
            for fmt in ATTEMPT_FORMATS
        ],
        "training:pools": [("page", "/training/"), ("page", "/training/" + _q(campaign=careless))],
        "training:report": [
            ("page", "/training/report/"),
            ("page", "/training/report/" + _q(base=careless, trained=steady, task=data.task.pk)),
        ],
        "triage:queue": [
            ("page", "/triage/"),
            ("page", "/triage/" + _q(scope="all", c=careless)),
            ("page", "/triage/" + _q(scope="failed", view="grouped")),
            ("page", "/triage/" + _q(scope="failed", view="list", q="ticket exception")),
            ("page", "/triage/" + _q(scope="failed", fault="error_after_commit")),
        ],
        "triage:bulk": [("action", "/triage/bulk/")],
        "triage:summary": [("page", "/triage/summary/")],
        "triage:health": [("page", "/triage/health/")],
        "triage:health_resolve": [("action", f"/triage/health/{data.issue.pk}/resolve/")],
        "triage:taxonomy": [
            ("page", "/triage/labels/"),
            ("page", "/triage/labels/" + _q(edit=data.label.pk)),
        ],
        "triage:attempt_panel": [("page", f"/triage/attempts/{data.failed_attempt.pk}/panel/")],
        "triage:task_health": [("page", f"/triage/tasks/{data.task.pk}/health/")],
        "triage:attempt_label": [("action", f"/triage/attempts/{data.failed_attempt.pk}/label/")],
        "triage:attempt_note": [("action", f"/triage/attempts/{data.failed_attempt.pk}/note/")],
        "triage:attempt_assign": [("action", f"/triage/attempts/{data.failed_attempt.pk}/assign/")],
        "triage:attempt_status": [("action", f"/triage/attempts/{data.failed_attempt.pk}/status/")],
        "triage:cluster_act": [("action", "/triage/clusters/act/")],
        "triage:cluster_undo": [("action", "/triage/clusters/undo/")],
        "triage:cluster": [
            ("page", f"/triage/clusters/{data.failed_attempt.signature}/"),
            ("page", f"/triage/clusters/{data.failed_attempt.signature}/" + _q(scope="failed")),
            ("page", f"/triage/clusters/{data.failed_attempt.signature}/" + _q(scope="failed", v=[1, 2])),
        ],
        "triage:suspects": [("page", "/triage/suspects/"), ("page", "/triage/suspects/" + _q(status="all"))],
        "triage:suspect_decide": [("action", f"/triage/suspects/{data.task.pk}/decide/")],
        "triage:judges": [("page", "/triage/judges/")],
        "triage:rubric_verdict": [
            ("action", f"/triage/attempts/{data.failed_attempt.pk}/rubrics/0/verdict/")
        ],
        "api:schema": [("file", "/api/schema/")],
        "api:docs": [("page", "/api/docs/")],
        "api:suites": [("page", "/api/suites/")],
        "api:suite": [("page", f"/api/suites/{data.suite.pk}/")],
        "api:suite_tasks": [("page", f"/api/suites/{data.suite.pk}/tasks/")],
        "api:task": [("page", f"/api/tasks/{data.task.pk}/")],
        "api:agents": [("page", "/api/agents/")],
        "api:agent": [("page", f"/api/agents/{data.agent.pk}/")],
        "api:price_sheets": [("page", "/api/price-sheets/")],
        "api:price_sheet": [("page", f"/api/price-sheets/{data.price_sheet.pk}/")],
        "api:campaigns": [("page", "/api/campaigns/")],
        "api:campaign": [("page", f"/api/campaigns/{careless}/")],
        "api:campaign_progress": [("page", f"/api/campaigns/{c['running'].pk}/progress/")],
        "api:campaign_robustness": [("page", f"/api/campaigns/{c['faulted'].pk}/robustness/")],
        "api:campaign_launch": [("page", f"/api/campaigns/{c['draft'].pk}/launch/")],
        "api:campaign_cancel": [("page", f"/api/campaigns/{c['running'].pk}/cancel/")],
        "api:campaign_resume": [("page", f"/api/campaigns/{c['down'].pk}/resume/")],
        "api:attempts": [("page", "/api/attempts/" + _q(campaign=careless))],
        "api:attempt": [("page", f"/api/attempts/{data.failed_attempt.pk}/")],
        "api:leaderboard": [("page", "/api/metrics/leaderboard/")],
        "api:training_pool": [
            ("page", "/api/training/pool/" + _q(campaign=careless)),
            ("page", "/api/training/pool/" + _q(campaign=careless, select="band", band_lo=0.2, band_hi=0.8)),
        ],
        "api:gap": [("page", "/api/metrics/gap/")],
        "api:cost": [("page", "/api/metrics/cost/")],
        "api:domains": [("page", "/api/metrics/domains/")],
        "api:compare": [("page", "/api/metrics/compare/" + _q(a=steady, b=careless))],
        "api:attempt_review": [("page", f"/api/attempts/{data.failed_attempt.pk}/review/")],
        "api:labels": [("page", "/api/triage/labels/")],
        "api:clusters": [("page", "/api/clusters/"), ("page", "/api/clusters/" + _q(campaign=careless))],
        "api:suspect_tasks": [("page", "/api/suspect-tasks/")],
        "api:judges": [("page", "/api/judges/")],
        "api:export_table": [
            ("file", f"/api/exports/tables/{name}/" + _q(campaign=[golden, careless], a=steady, b=careless))
            for name in TABLES
        ],
        "api:export_procurement": [("file", "/api/exports/procurement/" + _q(campaign=[steady, careless]))],
        "api:export_attempts": [("file", "/api/exports/attempts/" + _q(campaign=careless))],
        "api:unknown": [("page", "/api/no-such-endpoint/")],
        "api:campaign_replicate": [("page", f"/api/campaigns/{steady}/replicate/")],
        "api:noise": [("page", "/api/metrics/noise/" + _q(campaign=[steady, careless]))],
        "api:replicates": [("page", "/api/metrics/replicates/")],
        "api:planner": [("page", "/api/planner/" + _q(campaigns=steady, target_pp=5))],
        "api:gates": [("page", "/api/gates/")],
        "api:regrades": [("page", "/api/regrades/")],
        "api:regrade": [("page", f"/api/regrades/{data.regrade.pk}/")],
        "api:regrade_apply": [("page", f"/api/regrades/{data.regrade.pk}/apply/")],
        "regrade:list": [("page", "/regrades/")],
        "regrade:start": [("action", "/regrades/start/")],
        "regrade:detail": [("page", f"/regrades/{data.regrade.pk}/")],
        "regrade:apply": [("action", f"/regrades/{data.regrade.pk}/apply/")],
        "regrade:xlsx": [("file", f"/regrades/{data.regrade.pk}/report.xlsx")],
        "regrade:versions": [("page", f"/regrades/campaigns/{careless}/versions/")],
        "api:watches": [("page", "/api/watches/")],
        "api:watch": [("page", f"/api/watches/{data.watch.pk}/")],
        "api:watch_runs": [("page", f"/api/watches/{data.watch.pk}/runs/")],
        "api:watch_run_now": [("page", f"/api/watches/{data.watch.pk}/run/")],
        "api:run_acknowledge": [("page", f"/api/watch-runs/{data.watch_run.pk}/acknowledge/")],
        "api:run_baseline": [("page", f"/api/watch-runs/{data.watch_run.pk}/baseline/")],
        "campaigns:replicate": [("action", f"/campaigns/{steady}/replicate/")],
        "dashboard:noise": [("page", "/noise/"), ("page", "/noise/" + _q(domain="retail"))],
        "dashboard:planner": [
            ("page", "/planner/"),
            ("page", "/planner/" + _q(campaigns=steady, mode="drift", target_pp=5)),
        ],
        "dashboard:suites": [("page", "/suites/")],
        "dashboard:suite": [("page", f"/suites/{data.suite.pk}/"), ("page", f"/suites/{c['tb'].suite_id}/")],
        "dashboard:suite_validate": [("action", f"/suites/{data.suite.pk}/validate/")],
        "drift:list": [("page", "/drift/")],
        "drift:create": [("page", "/drift/new/")],
        "drift:detail": [("page", f"/drift/{data.watch.pk}/")],
        "drift:run_now": [("action", f"/drift/{data.watch.pk}/run/")],
        "drift:toggle": [("action", f"/drift/{data.watch.pk}/toggle/")],
        "drift:acknowledge": [("action", f"/drift/runs/{data.watch_run.pk}/acknowledge/")],
        "drift:baseline": [("action", f"/drift/runs/{data.watch_run.pk}/baseline/")],
        # Last of the drift actions, so the others still find the watch.
        "drift:delete": [("action", f"/drift/{data.watch.pk}/delete/")],
        "adaptive:suites": [("page", "/adaptive/")],
        "adaptive:suite": [("page", f"/adaptive/suites/{data.suite.pk}/")],
        "adaptive:campaign": [
            ("page", f"/adaptive/campaigns/{c['adaptive'].pk}/"),
            ("page", f"/adaptive/campaigns/{careless}/"),
        ],
    }
    samples: dict[str, list[tuple[str, str]]] = {}
    for route, name, entry in walk(get_resolver().url_patterns):
        admin_paths = admin_samples(route, name, entry)
        if admin_paths is not None:
            samples[route] = [item if isinstance(item, tuple) else ("page", item) for item in admin_paths]
        elif name in by_name:
            samples[route] = by_name[name]
    return samples


@dataclass
class Persona:
    who: str
    session: str | None  # session cookie; None for the anonymous visitor
    staff: bool


def persona(who: str, user) -> Persona:
    """A signed-in session for `user` (a Client of its own: logging another user into it would end this one)."""
    from django.test import Client

    if user is None:
        return Persona(who, None, False)
    client = Client()
    client.force_login(user)
    return Persona(who, client.cookies["sessionid"].value, user.is_staff)


def _own_status_message(message: dict, url: str) -> bool:
    match = OWN_STATUS.match(message["text"])
    return bool(match) and int(match[1]) < 500 and message["url"] == url


async def fetch(page, url: str, problems: list[str], what: str, *, method: str = "get", **options) -> int:
    """GET or POST through the page's context (its cookies), not following redirects; a 5xx is a problem."""
    response = await getattr(page.request, method)(url, max_redirects=0, **options)
    if response.status >= 500:
        problems.append(f"{what}: {response.status}")
    return response.status


async def visit(page, url: str, problems: list[str], what: str) -> tuple[int, str]:
    """Open url in Chromium; a 5xx, a console error or an uncaught page error is a problem. (status, content type)"""
    page.messages.clear()
    try:
        response = await page.goto(url, wait_until="load")
    except Exception as exc:  # playwright's Error
        if "Download is starting" not in str(exc):  # an attachment is no page to render: its status counts
            raise
        return await fetch(page, url, problems, what), ""
    status = response.status if response else 0
    content_type = (response.headers.get("content-type", "") if response else "").split(";")[0]
    if content_type == "text/html" and await page.locator('[hx-trigger="load"]').count():
        await page.wait_for_load_state(
            "networkidle"
        )  # fragments loaded with the page (triage panel, task health)
    if status >= 500 or status == 0:
        problems.append(f"{what}: {status}")
    problems.extend(
        f"{what}: console: {message['text']} ({message['url']})"
        for message in page.messages
        if not _own_status_message(message, page.url)
    )
    return status, content_type


async def walk_pages(page, base: str, who: Persona, paths, problems: list[str]) -> None:
    """Every sample path as this persona: pages in Chromium, files and actions through the page's context."""
    for kind, path in paths:
        url, what = base + path, f"{who.who} GET {path}"
        if kind in ("file", "action"):
            await fetch(page, url, problems, what)  # an action answers GET with an empty 405
            continue
        # Where the answer is a redirect to a login page (the anonymous visitor everywhere, non-staff
        # users in the admin) Chromium would render that login page, which has its own sample path:
        # the redirect's status is checked without rendering the page again.
        if who.session is None or (path.startswith("/admin/") and not who.staff):
            if 300 <= await fetch(page, url, problems, what) < 400:
                continue
        status, content_type = await visit(page, url, problems, what)
        if status == 200 and content_type == "text/html" and not path.startswith(("/admin/", "/api/")):
            # Pages speak plainly: no references into our design documents (the glossary explains).
            if "SPEC §" in await page.content():
                problems.append(f"{what}: insider text 'SPEC §' on the page")
        if (
            status == 200
            and content_type == "text/html"
            and await page.locator("[hx-get], [hx-post]").count()
        ):
            # The page swaps fragments of itself: its htmx answer (a partial) must render too.
            await fetch(page, url, problems, f"{what} (htmx)", headers={"HX-Request": "true"})


async def post_everywhere(page, base: str, who: Persona, paths, problems: list[str]) -> None:
    """An empty POST (with the CSRF token) to every non-admin page and action: bad input is never a 500."""
    cookies = {cookie["name"]: cookie["value"] for cookie in await page.context.cookies()}
    headers = {"X-CSRFToken": cookies.get("csrftoken", ""), "Referer": base + "/"}
    for kind, path in paths:
        if kind == "file" or path.startswith(("/admin/", "/accounts/logout/")):
            continue  # admin POSTs would delete rows; logging out would end the walk
        await fetch(
            page, base + path, problems, f"{who.who} POST {path}", method="post", headers=headers, form={}
        )


async def walk_site(base: str, personas: list[Persona], paths) -> list[str]:
    """One Chromium, one page per persona; the personas walk at the same time, then POST one after another."""
    from playwright.async_api import async_playwright

    problems: list[str] = []
    host = base.split("//")[1].split(":")[0]
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            pages = []
            for who in personas:
                context = await browser.new_context(viewport={"width": 1440, "height": 900})
                if who.session:
                    await context.add_cookies(
                        [{"name": "sessionid", "value": who.session, "domain": host, "path": "/"}]
                    )
                page = await context.new_page()
                page.messages = []
                page.on(
                    "console",
                    lambda message, page=page: (
                        page.messages.append({"text": message.text, "url": message.location.get("url", "")})
                        if message.type == "error"
                        else None
                    ),
                )
                page.on(
                    "pageerror",
                    lambda error, page=page: page.messages.append({"text": str(error), "url": ""}),
                )
                pages.append(page)
            await asyncio.gather(
                *(walk_pages(page, base, who, paths, problems) for page, who in zip(pages, personas))
            )
            # POSTs change data (cancel, resume, labels): one persona at a time, after every GET.
            for page, who in zip(pages, personas):
                await post_everywhere(page, base, who, paths, problems)
        finally:
            await browser.close()
    return problems


def test_every_page_renders_for_every_persona_without_5xx_or_console_errors(
    live_server,
    run_campaign,
    make_campaign,
    starter_suite,
    team_a,
    team_b,
    alice,
    bob,
    trish,
    charlie,
    erin,
    make_user,
):
    pytest.importorskip("playwright.async_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed")
    from django.urls import get_resolver

    admin = make_user("ada", role="admin", is_staff=True)
    data = build_demo_data(
        run_campaign=run_campaign,
        make_campaign=make_campaign,
        starter_suite=starter_suite,
        team_a=team_a,
        team_b=team_b,
        alice=alice,
        trish=trish,
        erin=erin,
    )
    samples = sample_paths(data)
    unsampled = [route for route, _, _ in walk(get_resolver().url_patterns) if not samples.get(route)]
    assert unsampled == []  # a new URL pattern needs a sample path in sample_paths()
    paths = [item for route in samples for item in samples[route]]
    personas = [
        persona("anonymous", None),
        persona("outsider charlie", charlie),
        persona("viewer bob", bob),
        persona("team B viewer erin", erin),
        persona("triager trish", trish),
        persona("operator alice", alice),
        persona("admin ada", admin),
    ]

    problems = asyncio.run(walk_site(live_server.url, personas, paths))

    assert problems == [], "\n" + "\n".join(problems)
