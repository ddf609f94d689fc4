"""Downloads: any dashboard table as CSV/XLSX, the procurement workbook, streamed attempt rows."""

from __future__ import annotations

from datetime import UTC, datetime

from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods

from apps.campaigns.models import Attempt
from apps.campaigns.selectors import campaigns_visible_to
from apps.core.access import require_role
from apps.core.roles import Role
from apps.exports import procurement, stream
from apps.exports.tables import BUILDERS
from apps.exports.writers import table_csv, table_xlsx
from apps.figures.selectors import figure_campaigns

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def _attachment(response, filename: str):
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_GET
@require_role(Role.VIEWER)
def table(request, name: str, fmt: str):
    """One dashboard table (same query parameters as its page) as .csv or .xlsx."""
    builder = BUILDERS.get(name)
    if builder is None or fmt not in ("csv", "xlsx"):
        raise Http404(f"no exportable table {name!r} as {fmt!r}")
    data = builder(request.user, request.GET)
    if fmt == "csv":
        return _attachment(
            HttpResponse(table_csv(data), content_type="text/csv; charset=utf-8"), f"{name}.csv"
        )
    return _attachment(HttpResponse(table_xlsx(data), content_type=XLSX), f"{name}.xlsx")


def _chosen(request) -> list:
    ids = [int(v) for v in request.GET.getlist("c") if v.isdigit()]
    return figure_campaigns(request.user, ids=ids) if ids else []


@require_http_methods(["GET"])
@require_role(Role.VIEWER)
def procurement_workbook(request):
    """Pick campaigns; with ?c=…&download=1 returns the workbook (only visible campaigns count)."""
    chosen = _chosen(request)
    if chosen and request.GET.get("download"):
        content, digest = procurement.build_workbook(campaigns=chosen)
        response = _attachment(
            HttpResponse(content, content_type=XLSX),
            f"procurement-{datetime.now(UTC):%Y%m%d}.xlsx",
        )
        response["X-Content-SHA256"] = digest
        return response
    context = {"campaigns": figure_campaigns(request.user), "selected": {c.pk for c in chosen}}
    return render(request, "exports/procurement.html", context)


@require_GET
@require_role(Role.VIEWER)
def attempts(request, fmt: str):
    """Every attempt of the chosen visible campaigns (?c=…, required), streamed; ?result=1 adds the result JSON."""
    if fmt not in stream.CONTENT_TYPES:
        raise Http404(f"attempt export as {fmt!r} is not offered (csv, jsonl)")
    ids = [int(v) for v in request.GET.getlist("c") if v.isdigit()]
    visible = list(campaigns_visible_to(request.user).filter(pk__in=ids).values_list("pk", flat=True))
    if not visible:
        raise Http404("choose at least one campaign of your teams (?c=ID)")
    body = stream.attempt_export(
        Attempt.objects.filter(campaign_id__in=visible), fmt=fmt, with_result=request.GET.get("result") == "1"
    )
    return _attachment(
        StreamingHttpResponse(body, content_type=stream.CONTENT_TYPES[fmt]),
        f"attempts-{'-'.join(map(str, visible))}.{fmt}",
    )
