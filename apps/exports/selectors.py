"""The exports app's public reads: every download as a file (content, type, name), for the pages and the API.

The web views and the REST API both call these, so a file from the API equals the one the page
offers; only campaigns the user may see ever reach a builder.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from django.http import QueryDict

from apps.campaigns.models import Attempt, Campaign
from apps.campaigns.selectors import campaigns_visible_to
from apps.exports import procurement, stream
from apps.exports.tables import BUILDERS
from apps.exports.writers import table_csv, table_xlsx

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
CSV = "text/csv; charset=utf-8"
# Names of the exportable dashboard tables, sorted (the path parameter of both URLs).
TABLES = tuple(sorted(BUILDERS))
TABLE_FORMATS = ("csv", "xlsx")
ATTEMPT_FORMATS = tuple(stream.CONTENT_TYPES)


@dataclass(frozen=True)
class ExportFile:
    """A download: its bytes (or text), content type and attachment filename."""

    content: bytes | str
    content_type: str
    filename: str


@dataclass(frozen=True)
class StreamedExport:
    """A download too large to hold: pieces of text produced while the response is sent."""

    pieces: Iterator[str]
    content_type: str
    filename: str


def table_file(*, user, name: str, fmt: str, query: QueryDict) -> ExportFile:
    """One dashboard table (the page's query parameters) as CSV or XLSX; LookupError for an unknown name or format."""
    builder = BUILDERS.get(name)
    if builder is None or fmt not in TABLE_FORMATS:
        raise LookupError(f"no exportable table {name!r} as {fmt!r}; tables: {', '.join(TABLES)}")
    table = builder(user, query)
    if fmt == "csv":
        return ExportFile(table_csv(table), CSV, f"{name}.csv")
    return ExportFile(table_xlsx(table), XLSX, f"{name}.xlsx")


def procurement_file(*, campaigns: list[Campaign]) -> tuple[ExportFile, str]:
    """The procurement workbook of the campaigns (in order) and its content hash (sha256 of the data sheets)."""
    content, digest = procurement.build_workbook(campaigns=campaigns)
    return ExportFile(content, XLSX, f"procurement-{datetime.now(UTC):%Y%m%d}.xlsx"), digest


def attempt_rows(*, user, campaign_ids: Iterable[int], fmt: str, with_result: bool) -> StreamedExport | None:
    """Every attempt of the chosen campaigns the user may see, streamed as CSV or JSON lines; None if none is visible.

    ValueError for a format other than ATTEMPT_FORMATS. Nothing is queried for the rows until the
    first piece is read.
    """
    if fmt not in ATTEMPT_FORMATS:
        raise ValueError(f"attempt export as {fmt!r}: choose one of {', '.join(ATTEMPT_FORMATS)}")
    visible = list(campaigns_visible_to(user).filter(pk__in=list(campaign_ids)).values_list("pk", flat=True))
    if not visible:
        return None
    pieces = stream.attempt_export(
        Attempt.objects.filter(campaign_id__in=visible), fmt=fmt, with_result=with_result
    )
    return StreamedExport(pieces, stream.CONTENT_TYPES[fmt], f"attempts-{'-'.join(map(str, visible))}.{fmt}")
