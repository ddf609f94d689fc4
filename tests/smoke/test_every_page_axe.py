"""axe-core, page width and page weight on every page a user can reach: each 'page' sample path of
the smoke test, demo-like data (issue 18's acceptance).

The smoke test's sample paths cover every URL pattern (noise, planner, drift, adaptive, attempt,
task, triage health/summary/labels, training, …), so a new page is checked here without a new
line. Pages are opened as the admin, who sees every team's data; Django's own admin site is left
out, and so are DRF's browsable API and the Swagger UI (their markup is not ours). axe-core (vendored under tests/support/vendor, injected
into the test page only) must report no critical and no serious violation; no page may be wider
than the window at 1280×800 and 1920×1080; a page without charts (no Plotly) must weigh under
300 KB: its HTML and every resource it loads, uncompressed (an upper bound of what it transfers).
Every table on every page shows every column (issue 30): with each scrolling frame around it
scrolled to its end, the last column header and each row's last cell are inside the window and
not clipped by any ancestor; html and body never hide what overflows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.smoke.demo_data import build_demo_data
from tests.smoke.test_every_page import sample_paths
from tests.support.browser import signed_in_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Markup that is not ours: Django's admin site, DRF's browsable API and the Swagger UI at /api/docs/
# (the API's HTML face for developers; its JSON is what clients use), and logging out.
THIRD_PARTY = ("/admin/", "/api/", "/accounts/logout/")
AXE = Path(__file__).resolve().parents[1] / "support" / "vendor" / "axe-core" / "axe.min.js"
WEIGHT_BUDGET = 300_000  # bytes, pages without charts
# The page's own HTML plus every resource it loaded, decoded sizes (cache hits report them too).
WEIGHT = """() => performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
  .reduce((total, entry) => total + (entry.decodedBodySize || 0), 0)"""
FITS = "document.documentElement.scrollWidth <= window.innerWidth"
CHARTS = "Array.from(document.scripts).some(s => s.src.includes('plotly'))"
# What sticks out of the window on a page that is too wide (the first few, innermost last): the message.
STICKING_OUT = """() => Array.from(document.querySelectorAll('body *'))
  .filter(el => el.getBoundingClientRect().right > window.innerWidth + 1)
  .slice(-4).map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + '.' + String(el.className).split(' ').join('.'))"""
NO_HIDDEN_OVERFLOW = """() => [document.documentElement, document.body]
  .every(el => !['hidden', 'clip'].includes(getComputedStyle(el).overflowX))"""
# Every table, every frame scrolled to its end: the last column header and each row's last cell lie
# inside the window and inside every ancestor that clips (overflow other than visible). Returns
# what does not, as "table#id: header|row N: clipped by <ancestor>".
TABLE_ENDS_REACHABLE = """() => {
  const problems = [];
  const clips = el => { const s = getComputedStyle(el); return s.overflowX !== 'visible' || s.overflowY !== 'visible'; };
  const label = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  document.querySelectorAll('table').forEach((table, index) => {
    if (!table.getClientRects().length || table.closest('details:not([open])')) return;  // not rendered
    for (let el = table.parentElement; el; el = el.parentElement) {
      if (el.scrollWidth > el.clientWidth) el.scrollLeft = el.scrollWidth;  // each frame to its end
    }
    window.scrollTo(document.documentElement.scrollWidth, window.scrollY);
    const name = table.id ? 'table#' + table.id : 'table ' + index;
    const ends = [];
    const head = table.tHead && table.tHead.rows.length ? table.tHead.rows[table.tHead.rows.length - 1] : null;
    if (head && head.cells.length) ends.push(['header', head.cells[head.cells.length - 1]]);
    Array.from(table.tBodies).flatMap(body => Array.from(body.rows)).forEach((row, n) => {
      if (row.cells.length) ends.push(['row ' + n, row.cells[row.cells.length - 1]]);
    });
    for (const [what, cell] of ends) {
      const box = cell.getBoundingClientRect();
      if (!box.width) continue;
      if (box.right > window.innerWidth + 1 || box.left < -1) { problems.push(`${name} ${what}: outside the window`); continue; }
      for (let el = cell.parentElement; el && el !== document.documentElement; el = el.parentElement) {
        if (!clips(el) || el.tagName === 'TABLE') continue;
        const frame = el.getBoundingClientRect();
        if (box.right > frame.right + 1 || box.left < frame.left - 1) { problems.push(`${name} ${what}: clipped by ${label(el)}`); break; }
      }
    }
  });
  return problems;
}"""


def _html_page(page, url: str) -> bool:
    """Open url; False for what is not a page of ours to audit (a download, JSON, an htmx fragment)."""
    try:
        response = page.goto(url, wait_until="networkidle")
    except Exception as exc:  # playwright's Error
        if "Download is starting" in str(exc):
            return False  # an attachment: no page to audit
        raise
    if (
        response is None
        or response.status != 200
        or "text/html" not in response.headers.get("content-type", "")
    ):
        return False  # a JSON API answer or a download: no page to audit
    # An htmx fragment fetched on its own is audited inside the page that loads it.
    return bool(page.evaluate("document.doctype !== null"))


def test_every_page_passes_axe_core_fits_the_window_shows_every_column_and_keeps_its_weight(
    live_server,
    client,
    run_campaign,
    make_campaign,
    starter_suite,
    team_a,
    team_b,
    alice,
    trish,
    erin,
    make_user,
):
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
    pages = sorted(
        {
            path
            for paths in sample_paths(data).values()
            for kind, path in paths
            if kind == "page" and not path.startswith(THIRD_PARTY)
        }
    )
    found, checked, wide, clipped, heavy = [], [], [], [], {}
    with signed_in_page(live_server, client, admin, viewport=(1280, 800)) as page:
        for path in pages:
            if not _html_page(page, live_server.url + path):
                continue
            checked.append(path)
            if not page.evaluate(FITS):
                wide.append(f"{path} at 1280: {page.evaluate(STICKING_OUT)}")
            clipped.extend(f"{path} at 1280: {problem}" for problem in page.evaluate(TABLE_ENDS_REACHABLE))
            if not page.evaluate(NO_HIDDEN_OVERFLOW):
                clipped.append(f"{path}: html or body hides what overflows")
            if not page.evaluate(CHARTS) and (weight := page.evaluate(WEIGHT)) >= WEIGHT_BUDGET:
                heavy[path] = weight
            page.add_script_tag(path=str(AXE))
            result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
            for violation in result["violations"]:
                if violation["impact"] in ("critical", "serious"):
                    targets = [node["target"] for node in violation["nodes"][:3]]
                    found.append(f"{path}: {violation['id']} ({violation['impact']}) {targets}")
    with signed_in_page(live_server, client, admin, viewport=(1920, 1080)) as page:
        for path in checked:
            if not _html_page(page, live_server.url + path):
                continue
            if not page.evaluate(FITS):
                wide.append(f"{path} at 1920: {page.evaluate(STICKING_OUT)}")
            clipped.extend(f"{path} at 1920: {problem}" for problem in page.evaluate(TABLE_ENDS_REACHABLE))
    reached = {path.split("?")[0].strip("/").split("/")[0] for path in checked}
    assert found == [], "\n".join(found)
    assert wide == [], "\n".join(wide)
    assert clipped == [], "\n".join(clipped)
    assert heavy == {}
    assert {"noise", "planner", "drift", "adaptive", "attempts", "tasks", "triage", "training"} <= reached
    # The triage-at-scale pages are among them: a cluster, the suspect tasks, the judges.
    assert {"/triage/suspects/", "/triage/judges/"} <= set(checked)
    assert any(path.startswith("/triage/clusters/") for path in checked)
