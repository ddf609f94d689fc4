"""Downloads: any dashboard table as CSV/XLSX, the procurement workbook, streamed attempt rows."""

from __future__ import annotations

from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods

from apps.core.access import require_role, teams_for
from apps.core.roles import Role
from apps.exports import selectors
from apps.figures.selectors import figure_campaigns


def _attachment(response, filename: str):
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_GET
@require_role(Role.VIEWER)
def table(request, name: str, fmt: str):
    """One dashboard table (same query parameters as its page) as .csv or .xlsx."""
    if name not in selectors.TABLES or fmt not in selectors.TABLE_FORMATS:
        raise Http404(f"no exportable table {name!r} as {fmt!r}")
    file = selectors.table_file(user=request.user, name=name, fmt=fmt, query=request.GET)
    return _attachment(HttpResponse(file.content, content_type=file.content_type), file.filename)


def _chosen(request) -> list:
    ids = [int(v) for v in request.GET.getlist("c") if v.isdigit()]
    return figure_campaigns(request.user, ids=ids) if ids else []


@require_http_methods(["GET"])
@require_role(Role.VIEWER)
def procurement_workbook(request):
    """Pick campaigns; with ?c=…&download=1 returns the workbook (only visible campaigns count);
    ?target= (% of tasks dependable) and ?budget= ($ per 1,000 tasks) set its cost sheet."""
    chosen = _chosen(request)
    if chosen and request.GET.get("download"):
        file, digest = selectors.procurement_file(
            campaigns=chosen, user=request.user, asks=selectors.reviewer_asks(request.GET)
        )
        response = _attachment(HttpResponse(file.content, content_type=file.content_type), file.filename)
        response["X-Content-SHA256"] = digest
        return response
    # Submitting the form with nothing ticked says so instead of quietly showing the form again.
    error = "Choose at least one campaign to put in the workbook." if request.GET.get("download") else ""
    context = {
        "campaigns": figure_campaigns(request.user),
        "selected": {c.pk for c in chosen},
        "error": error,
        "asks": selectors.reviewer_asks(request.GET),
        "teams": teams_for(request.user),
    }
    return render(request, "exports/procurement.html", context)


@require_GET
@require_role(Role.VIEWER)
def attempts(request, fmt: str):
    """Every attempt of the chosen visible campaigns (?c=…, required), streamed; ?result=1 adds the result JSON."""
    if fmt not in selectors.ATTEMPT_FORMATS:
        raise Http404(f"attempt export as {fmt!r} is not offered (csv, jsonl)")
    export = selectors.attempt_rows(
        user=request.user,
        campaign_ids=[int(v) for v in request.GET.getlist("c") if v.isdigit()],
        fmt=fmt,
        with_result=request.GET.get("result") == "1",
    )
    if export is None:
        raise Http404("choose at least one campaign of your teams (?c=ID)")
    return _attachment(
        StreamingHttpResponse(export.pieces, content_type=export.content_type), export.filename
    )
