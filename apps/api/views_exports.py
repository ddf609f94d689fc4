"""Downloads over the API: any dashboard table as CSV/XLSX, the procurement workbook, attempt rows.

Each calls the exports app's selectors, as the pages do, so a file from the API equals the one the page offers.
Only parameters validated here reach a builder: ids are bounded, choices are checked.
"""

from __future__ import annotations

from django.http import Http404, HttpResponse, QueryDict, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.negotiation import BaseContentNegotiation

from apps.api.base import ApiView, api_schema, id_field
from apps.exports import selectors as exports
from apps.exports.selectors import TABLES, XLSX
from apps.figures.selectors import LEADERBOARD_SORTS, figure_campaigns

TAGS = ["exports"]
FILE = OpenApiResponse(OpenApiTypes.BINARY, description="The file, as an attachment.")


class FirstRendererNegotiation(BaseContentNegotiation):
    """Files are not chosen by Accept: a client asking for text/csv must not get a 406. Errors stay JSON."""

    def select_parser(self, request, parsers):
        return parsers[0]

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


def _attachment(response, filename: str):
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


class TableExportFilter(serializers.Serializer):
    file = serializers.ChoiceField(choices=["csv", "xlsx"], default="csv", help_text="File format.")
    campaign = serializers.ListField(
        child=id_field(), required=False, help_text="Campaign ids (repeat), where the table takes them."
    )
    domain = serializers.CharField(required=False, max_length=100)
    sort = serializers.ChoiceField(choices=sorted(LEADERBOARD_SORTS), required=False)
    dir = serializers.ChoiceField(choices=["asc", "desc"], required=False)
    a = id_field(required=False, help_text="compare: campaign A.")
    b = id_field(required=False, help_text="compare: campaign B.")
    filter = serializers.ChoiceField(
        choices=["", "unreliable", "never", "flaky"], required=False, help_text="tasks table filter."
    )
    healthy = serializers.ChoiceField(
        choices=["exclude"], required=False, help_text="leaderboard: leave out tasks with open health issues."
    )


def _builder_query(query: dict) -> QueryDict:
    """The page-style query string the table builders read (campaign ids are `c` there)."""
    built = QueryDict(mutable=True)
    built.setlist("c", [str(pk) for pk in query.get("campaign", [])])
    for name in ("domain", "sort", "dir", "a", "b", "filter", "healthy"):
        if query.get(name) not in (None, ""):
            built[name] = str(query[name])
    return built


class TableExportView(ApiView):
    content_negotiation_class = FirstRendererNegotiation

    @api_schema(
        summary="A dashboard table as CSV or XLSX",
        tags=TAGS,
        parameters=[
            TableExportFilter,
            OpenApiParameter("name", str, OpenApiParameter.PATH, enum=list(TABLES)),
        ],
        responses={(200, "text/csv"): FILE, (200, XLSX): FILE},
        errors=(400, 401, 403, 404),
    )
    def get(self, request, name: str):
        if name not in TABLES:
            raise Http404(f"no exportable table {name!r}; tables: {', '.join(TABLES)}")
        query = self.validated_query(TableExportFilter)
        file = exports.table_file(
            user=request.user, name=name, fmt=query["file"], query=_builder_query(query)
        )
        return _attachment(HttpResponse(file.content, content_type=file.content_type), file.filename)


class CampaignChoice(serializers.Serializer):
    campaign = serializers.ListField(
        child=id_field(), allow_empty=False, help_text="Campaign ids (repeat the parameter)."
    )


class ProcurementChoice(CampaignChoice):
    target = serializers.FloatField(
        default=exports.ReviewerAsks().target_percent,
        min_value=0,
        max_value=100,
        help_text="Dependable on at least this % of tasks (the cost sheet; the decision aid's default).",
    )
    budget = serializers.FloatField(
        default=exports.ReviewerAsks().budget,
        min_value=0,
        help_text="Budget in $ per 1,000 tasks (the cost sheet; the decision aid's default).",
    )


class ProcurementExportView(ApiView):
    content_negotiation_class = FirstRendererNegotiation

    @api_schema(
        summary="The procurement workbook for chosen campaigns (XLSX, SHA-256 in X-Content-SHA256)",
        tags=TAGS,
        parameters=[ProcurementChoice],
        responses={(200, XLSX): FILE},
        errors=(400, 401, 403, 404),
    )
    def get(self, request):
        query = self.validated_query(ProcurementChoice)
        campaigns = figure_campaigns(request.user, ids=query["campaign"])
        if not campaigns:
            raise Http404("none of these campaigns is visible to you")
        asks = exports.ReviewerAsks(target_percent=query["target"], budget=query["budget"])
        file, digest = exports.procurement_file(campaigns=campaigns, asks=asks)
        response = _attachment(HttpResponse(file.content, content_type=file.content_type), file.filename)
        response["X-Content-SHA256"] = digest
        return response


class AttemptExportFilter(CampaignChoice):
    file = serializers.ChoiceField(choices=["csv", "jsonl"], default="jsonl")
    result = serializers.BooleanField(
        default=False, help_text="Add each attempt's full result JSON (transcript, diff)."
    )


class AttemptExportView(ApiView):
    content_negotiation_class = FirstRendererNegotiation

    @api_schema(
        summary="Every attempt of chosen campaigns, streamed as JSON lines or CSV",
        tags=TAGS,
        parameters=[AttemptExportFilter],
        responses={(200, "application/x-ndjson"): FILE, (200, "text/csv"): FILE},
        errors=(400, 401, 403, 404),
    )
    def get(self, request):
        query = self.validated_query(AttemptExportFilter)
        export = exports.attempt_rows(
            user=request.user, campaign_ids=query["campaign"], fmt=query["file"], with_result=query["result"]
        )
        if export is None:
            raise Http404("none of these campaigns is visible to you")
        return _attachment(
            StreamingHttpResponse(export.pieces, content_type=export.content_type), export.filename
        )
