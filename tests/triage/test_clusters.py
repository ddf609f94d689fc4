"""Failure clusters (SPEC §8): exact grouping of attempts built with known diffs, the grouped queue, the cluster
page, one action over whole clusters, related signatures, the drilldown link; query-count guards."""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.attempts.models import Attempt
from apps.triage.models import AttemptReview, AuditEntry, Label
from apps.triage.selectors import QueueFilters, cluster_index, cluster_rows
from tb_engine.results import CheckResult, DiffItem
from tests.triage.conftest import T1, T2, T3

pytestmark = pytest.mark.django_db

# Tool-call indexes of stored_result's default calls: 0 find, 1 update_ticket, 2 create_refund.
LEFT_OPEN = DiffItem("missing_effect", "tickets", "20", "status", "open", "open", "hold")
LEFT_OPEN_31 = DiffItem("missing_effect", "tickets", "31", "status", "open", "open", "hold")
LEFT_NEW = DiffItem("missing_effect", "tickets", "44", "status", "new", "new", "resolved")
EXTRA_REFUND = DiffItem("extra_effect", "refunds", "R-1", None, None, {"id": "R-1", "amount": 20}, None, (2,))
WRONG_STATUS = DiffItem("wrong_value", "tickets", "20", "status", "open", "solved", "hold", (1,))
FAILED_CHECK = CheckResult("row_equals", "ticket resolved", False, "", False, "tickets.status")


def _ids(campaign, task_id: str, index: int) -> int:
    return Attempt.objects.get(campaign=campaign, task__task_id=task_id, index=index).pk


@pytest.fixture
def known(signed_campaign, team_b):
    """Two team-A campaigns (two models) and one team-B campaign whose failures have known diffs."""
    a = signed_campaign(
        [
            (T1, 0, {"diff": [LEFT_OPEN]}),
            (T3, 0, {"diff": [LEFT_OPEN_31]}),  # same mistake, another task and row: same cluster
            (T1, 1, {"diff": [LEFT_OPEN, EXTRA_REFUND]}),  # one element more: related cluster
            (T1, 2, {"diff": [WRONG_STATUS], "checks": [FAILED_CHECK]}),
            (T2, 0, {}),  # passes: no cluster
        ],
        name="Alpha",
        model="model-a",
    )
    b = signed_campaign(
        [
            (T2, 0, {"diff": [LEFT_OPEN]}),
            (T2, 1, {"diff": [LEFT_OPEN_31, EXTRA_REFUND]}),
            (T3, 0, {"diff": [WRONG_STATUS], "checks": [FAILED_CHECK], "termination": "max_turns"}),
        ],
        name="Beta",
        model="model-b",
    )
    other_team = signed_campaign(
        [(T1, 0, {"diff": [LEFT_OPEN]})], name="Secret", model="model-c", team=team_b
    )
    return a, b, other_team


def _clusters(user, **filters) -> dict[str, set[int]]:
    """Signature -> attempt ids, straight from the index's example ids and the queue filtered by signature."""
    from apps.triage.selectors import queue_queryset

    index = cluster_index(user=user, filters=QueueFilters(**filters))
    return {
        c.signature: set(
            queue_queryset(
                user=user, filters=QueueFilters(**filters).with_signature(c.signature)
            ).values_list("pk", flat=True)
        )
        for c in index.clusters
    }


def test_clusters_are_exactly_the_attempts_sharing_a_signature(known, bob):
    a, b, _ = known
    left_open = {_ids(a, T1, 0), _ids(a, T3, 0), _ids(b, T2, 0)}
    with_refund = {_ids(a, T1, 1), _ids(b, T2, 1)}
    wrong_clean = {_ids(a, T1, 2)}  # b's twin ended at max_turns: not clean-looking
    clusters = _clusters(bob)
    assert sorted(clusters.values(), key=sorted) == sorted([left_open, with_refund, wrong_clean], key=sorted)

    everything = _clusters(bob, scope="failed")
    assert sorted(everything.values(), key=sorted) == sorted(
        [left_open, with_refund, wrong_clean | {_ids(b, T3, 0)}], key=sorted
    )
    # Each cluster's attempts really share the stored signature, and no other attempt has it.
    for signature, ids in everything.items():
        assert (
            set(
                Attempt.objects.filter(failure_signature__digest=signature, campaign__in=[a, b]).values_list(
                    "pk", flat=True
                )
            )
            == ids
        )


def test_cluster_counts_spread_description_and_relatives(known, bob):
    a, b, _ = known
    index = cluster_index(user=bob, filters=QueueFilters())
    rows = cluster_rows(user=bob, filters=QueueFilters(), index=index, page=index[0:50])
    by_size = {row.cluster.size: row.cluster for row in rows}
    left_open, with_refund, wrong = by_size[3], by_size[2], by_size[1]

    assert (index.attempts, index.clean, len(index.clusters)) == (6, 6, 3)
    assert (left_open.tasks, left_open.campaigns, left_open.models) == (3, 2, 2)
    assert index.share(left_open) == 3 / 6
    assert left_open.description == "left ticket status open where golden has hold"
    assert with_refund.description == (
        "created an extra refund via create_refund; left ticket status open where golden has hold"
    )
    assert (
        wrong.description
        == "failed check: ticket resolved; set ticket status to solved via update_ticket where golden has hold"
    )
    assert wrong.categories == ["check_failed", "wrong_value"]
    # Near-identical signatures are related (one element apart), never merged.
    assert left_open.related == (with_refund.signature,)
    assert with_refund.related == (left_open.signature,)
    assert wrong.related == ()
    assert len(left_open.examples) == 2 and set(left_open.examples) <= {
        _ids(a, T1, 0),
        _ids(a, T3, 0),
        _ids(b, T2, 0),
    }
    # The row's spans, as the grouped page shows them: tasks and models with their counts.
    row = next(row for row in rows if row.cluster.signature == left_open.signature)
    assert row.tasks_title == ", ".join(f"{name} ({n})" for name, n in sorted((t, 1) for t in (T1, T2, T3)))
    assert row.tasks_text == ", ".join(sorted((T1, T2, T3)))
    assert row.models_title == "agent model-a (2), agent model-b (1)"
    fewer = replace(row, top_tasks=row.top_tasks[:2])  # a cluster spanning more tasks than the row names
    assert fewer.tasks_text == ", ".join(name for name, _ in row.top_tasks[:2]) + " …"


@pytest.mark.parametrize("scope", ["clean", "failed"])
def test_page_details_from_the_narrow_tables_equal_those_from_the_attempts(known, bob, scope):
    """Campaign/domain/task/scope filters read the count and signature tables; others read the
    attempts (category and review filters): both give the same termination, spread and variants."""
    from apps.triage import clusters
    from apps.triage.selectors import queue_queryset

    filters = QueueFilters(scope=scope)
    signatures = [c.signature for c in cluster_index(user=bob, filters=filters).clusters]
    campaign_ids, scoped = clusters._scope(bob, filters)
    base = queue_queryset(user=bob, filters=scoped).order_by()
    counts = clusters._counts(campaign_ids, scoped)
    assert counts is not None
    narrow = clusters._page_details(
        base, signatures, counts, clusters._signature_rows(campaign_ids, scoped), scoped
    )
    assert len(narrow) == len(signatures) == 3
    assert narrow == clusters._page_details(base, signatures, None, None, scoped)


def test_attempts_that_differ_in_values_get_the_description_without_values(signed_campaign, bob):
    signed_campaign([(T1, 0, {"diff": [LEFT_OPEN]}), (T3, 0, {"diff": [LEFT_NEW]})])
    index = cluster_index(user=bob, filters=QueueFilters())
    [row] = cluster_rows(user=bob, filters=QueueFilters(), index=index, page=index[:])
    cluster = row.cluster
    assert cluster.variants == 2
    assert cluster.description == "left ticket status unchanged where golden changes it"


def test_other_teams_attempts_never_join_a_cluster(known, bob, erin):
    a, b, secret = known
    assert all(_ids(secret, T1, 0) not in ids for ids in _clusters(bob).values())
    assert [set(ids) for ids in _clusters(erin).values()] == [{_ids(secret, T1, 0)}]


def test_labelling_a_cluster_labels_exactly_its_attempts(known, client, trish):
    a, b, secret = known
    index = cluster_index(user=trish, filters=QueueFilters())
    left_open = next(c for c in index.clusters if c.size == 3)
    label = Label.objects.get(name="premature close")
    client.force_login(trish)

    response = client.post(
        "/triage/clusters/act/",
        {"query": "", "s": [left_open.signature], "action": "label", "label": label.pk},
    )

    assert response.status_code == 302
    labelled = set(AttemptReview.objects.filter(labels=label).values_list("attempt_id", flat=True))
    assert labelled == {_ids(a, T1, 0), _ids(a, T3, 0), _ids(b, T2, 0)}
    # One audit entry per attempt, as for a single change; the other team's twin is untouched.
    entries = AuditEntry.objects.filter(field="labels")
    assert sorted(entries.values_list("attempt_id", flat=True)) == sorted(labelled)
    assert {(e.before_text, e.after_text) for e in entries} == {("—", "premature close")}
    assert not AttemptReview.objects.filter(attempt_id=_ids(secret, T1, 0)).exists()


def test_one_action_assigns_and_closes_whole_clusters(known, client, trish):
    a, b, _ = known
    index = cluster_index(user=trish, filters=QueueFilters())
    two = [c.signature for c in index.clusters if c.size in (2, 3)]
    client.force_login(trish)

    client.post("/triage/clusters/act/", {"query": "", "s": two, "action": "assign", "assignee": trish.pk})
    client.post("/triage/clusters/act/", {"query": "", "s": two, "action": "reviewed"})

    expected = {_ids(a, T1, 0), _ids(a, T3, 0), _ids(b, T2, 0), _ids(a, T1, 1), _ids(b, T2, 1)}
    reviews = AttemptReview.objects.filter(attempt__campaign__in=[a, b])
    assert set(reviews.filter(assignee=trish).values_list("attempt_id", flat=True)) == expected
    assert set(reviews.filter(status="reviewed").values_list("attempt_id", flat=True)) == expected
    assert AuditEntry.objects.filter(field="status").count() == 5
    assert AuditEntry.objects.filter(field="assignee", after="trish").count() == 5


def test_cluster_action_needs_the_triager_role_and_a_known_action(known, client, bob, trish):
    client.force_login(bob)
    assert client.post("/triage/clusters/act/", {"s": ["0" * 32], "action": "reviewed"}).status_code == 403
    client.force_login(trish)
    assert client.post("/triage/clusters/act/", {"s": ["0" * 32], "action": "explode"}).status_code == 400


def test_queue_is_grouped_beyond_a_screenful_and_flat_below(signed_campaign, client, bob):
    rows = [(T1, i, {"diff": [LEFT_OPEN]}) for i in range(30)] + [
        (T3, i, {"diff": [WRONG_STATUS]}) for i in range(21)
    ]
    campaign = signed_campaign(rows)
    client.force_login(bob)

    grouped = client.get("/triage/").content.decode()
    assert grouped.count('data-cluster="') == 2
    assert "2 clusters for 51 attempts (25.5 attempts per row)" in grouped
    assert 'data-attempt="' not in grouped
    flat = client.get("/triage/?view=list").content.decode()
    assert flat.count('data-attempt="') == 50  # one page of attempts
    small = client.get(f"/triage/?c={campaign.pk}&task={T3}").content.decode()
    assert small.count('data-attempt="') == 21 and 'data-cluster="' not in small  # fits: one row per attempt


def test_grouped_htmx_request_returns_only_the_rows_fragment(known, client, bob):
    client.force_login(bob)
    response = client.get("/triage/?view=grouped", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="triage-rows">')
    assert html.count('data-cluster="') == 3
    assert "<html" not in html


def _grouped_queries(client, campaign) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(f"/triage/?c={campaign.pk}&view=grouped")
    assert response.status_code == 200
    return len(captured)


def test_grouped_queue_query_count_is_the_same_for_one_and_three_clusters(signed_campaign, client, bob):
    one = signed_campaign([(T1, 0, {"diff": [LEFT_OPEN]})], name="One")
    three = signed_campaign(
        [
            (T1, 0, {"diff": [LEFT_OPEN]}),
            (T1, 1, {"diff": [WRONG_STATUS]}),
            (T3, 0, {"diff": [LEFT_OPEN, EXTRA_REFUND]}),
        ],
        name="Three",
        model="model-b",
    )
    client.force_login(bob)
    from apps.figures.selectors import figure_campaigns, filter_options

    filter_options(figure_campaigns(bob))  # what both pages share (one suite), stored first
    counts = [_grouped_queries(client, campaign) for campaign in (one, three)]
    html = client.get(f"/triage/?c={three.pk}&view=grouped").content.decode()
    assert html.count('data-cluster="') == 3
    assert counts[0] == counts[1]


def test_cluster_page_shows_the_cluster_its_campaigns_and_relatives(known, client, bob):
    a, b, _ = known
    index = cluster_index(user=bob, filters=QueueFilters())
    left_open = next(c for c in index.clusters if c.size == 3)
    client.force_login(bob)

    response = client.get(f"/triage/clusters/{left_open.signature}/")

    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="cluster-description">left ticket status open where golden has hold</h2>' in html
    assert html.count('data-attempt="') == 3
    assert "+ created an extra refund via create_refund" in html  # the related cluster, by its difference
    chart = response.context["distribution"]["figure"]["data"][0]
    assert dict(zip(chart["x"], chart["y"])) == {"Alpha": 2, "Beta": 1}


def test_cluster_page_is_404_for_outsiders_and_unknown_signatures(known, client, erin, charlie):
    a, _, _ = known
    signature = Attempt.objects.get(pk=_ids(a, T1, 0)).signature
    client.force_login(erin)
    assert client.get(f"/triage/clusters/{signature}/").status_code == 200  # team B has a twin of it
    client.force_login(erin)
    assert client.get(f"/triage/clusters/{'f' * 32}/").status_code == 404
    assert client.get("/triage/clusters/not-a-signature/").status_code == 404
    client.force_login(charlie)
    assert client.get(f"/triage/clusters/{signature}/").status_code == 403


def test_cluster_page_of_another_teams_only_signature_is_404(signed_campaign, team_b, client, bob):
    secret = signed_campaign([(T1, 0, {"diff": [WRONG_STATUS]})], name="Secret", model="m-s", team=team_b)
    signature = secret.attempts.get().signature
    client.force_login(bob)
    assert client.get(f"/triage/clusters/{signature}/").status_code == 404


def test_cluster_page_query_count_is_the_same_for_one_and_three_attempts(signed_campaign, client, bob):
    one = signed_campaign([(T1, 0, {"diff": [LEFT_OPEN]})], name="One")
    three = signed_campaign([(T1, i, {"diff": [WRONG_STATUS]}) for i in range(3)], name="Three", model="m3")
    client.force_login(bob)
    counts = []
    for campaign in (one, three):
        signature = campaign.attempts.first().signature
        with CaptureQueriesContext(connection) as captured:
            html = client.get(f"/triage/clusters/{signature}/?c={campaign.pk}").content.decode()
        counts.append(len(captured))
        assert html.count('data-attempt="') == campaign.attempts.count()
    assert counts[0] == counts[1]


def test_drilldown_panel_links_to_the_attempts_cluster(known, client, bob):
    a, b, _ = known
    attempt = Attempt.objects.get(pk=_ids(a, T1, 0))
    client.force_login(bob)

    html = client.get(f"/triage/attempts/{attempt.pk}/panel/").content.decode()

    assert (
        f'href="/triage/clusters/{attempt.signature}/?scope=failed">2 other attempts failed the same way</a>'
        in html
    )


def test_cluster_table_export_matches_the_grouped_view(known, client, bob):
    client.force_login(bob)
    lines = client.get("/exports/tables/clusters.csv").content.decode().splitlines()
    csv = [line for line in lines if not line.startswith("# ")]  # after the About block
    assert csv[0].startswith(
        "signature,attempts,clean-looking failures,share of clean-looking failures,what the attempts did"
    )
    sizes = sorted(int(line.split(",")[1]) for line in csv[1:])
    assert sizes == [1, 2, 3]


def _fresh_process_grouped_page(client) -> tuple[str, list[str]]:
    """The default grouped page as a fresh server process serves it: shared cache and process figures empty."""
    from django.core.cache import cache

    from apps.figures.tables import forget_process_figures

    cache.clear()
    forget_process_figures()
    with CaptureQueriesContext(connection) as captured:
        response = client.get("/triage/?view=grouped")
    assert response.status_code == 200
    return response.content.decode(), [query["sql"] for query in captured]


def test_a_stored_index_is_read_by_a_fresh_process_without_grouping_and_follows_new_signatures(
    known, signed_campaign, client, bob
):
    from apps.figures.models import StoredFigure
    from apps.triage.clusters import _build_index_from_counts, _counts, _scope, _stamp
    from apps.triage.services import cluster_indexes_store

    a, b, _ = known
    StoredFigure.objects.filter(slot__contains="triage-").delete()
    assert cluster_indexes_store(campaign_ids=[a.pk]) == 1  # team A's default scope
    stored = set(StoredFigure.objects.filter(slot__contains="triage-").values_list("slot", flat=True))
    assert {slot.split(":")[1] for slot in stored} == {
        "triage-index",
        "triage-page",
        "triage-campaigns",
    }
    client.force_login(bob)
    html, queries = _fresh_process_grouped_page(client)
    grouping = [sql for sql in queries if "COUNT(DISTINCT" in sql and "signaturecount" in sql]
    assert grouping == []  # the index came from its stored row, not from grouping the count table
    # Nothing groups attempts: the only aggregates left are the review progress, driven by the reviews.
    aggregates = [sql for sql in queries if "GROUP BY" in sql]
    assert aggregates and all(
        sql.split(" FROM ", 1)[1].startswith('"triage_attemptreview"') for sql in aggregates
    )
    campaign_ids, filters = _scope(bob, QueueFilters())
    stamp = _stamp(campaign_ids, filters)
    built = _build_index_from_counts(_counts(campaign_ids, filters), filters, stamp)
    assert cluster_index(user=bob, filters=QueueFilters()).rows == built.rows
    assert html.count('data-cluster="') == len(built.rows)
    assert set(StoredFigure.objects.filter(slot__contains="triage-").values_list("slot", flat=True)) == stored

    # A new campaign of the team with one more failure: the scope's stamp changes, so the stored
    # index no longer answers; the next page groups again and stores the new one.
    signed_campaign([(T3, 1, {"diff": [LEFT_NEW]})], name="Gamma", model="model-g")
    html, _ = _fresh_process_grouped_page(client)
    campaign_ids, filters = _scope(bob, QueueFilters())
    rebuilt = _build_index_from_counts(_counts(campaign_ids, filters), filters, _stamp(campaign_ids, filters))
    assert (rebuilt.attempts, rebuilt.rows[0][1]) == (built.attempts + 1, built.rows[0][1] + 1)
    assert cluster_index(user=bob, filters=QueueFilters()).rows == rebuilt.rows
    assert html.count('data-cluster="') == len(rebuilt.rows)


def test_the_served_index_equals_grouping_the_attempts_after_each_kind_of_change(known, client, bob, trish):
    _served_index_follows_each_kind_of_change(known, client, bob, trish)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_the_served_index_follows_each_kind_of_change_on_postgresql(known, client, bob, trish):
    # PostgreSQL's statement-level triggers, and its own backfill path (grouping in SQL, COPY).
    _served_index_follows_each_kind_of_change(known, client, bob, trish)


def _served_index_follows_each_kind_of_change(known, client, bob, trish) -> None:
    """The scope's stamp (trigger-kept summary revisions) follows a re-grade that moves an attempt to
    another cluster without changing a count, a signature backfill (signatures_at only) and a suite
    revision; a label changes nothing the index holds, so it keeps the stamp."""
    from django.utils import timezone

    from apps.attempts.models import AttemptSignature
    from apps.attempts.regrading import GradingChange, gradings_apply
    from apps.attempts.services import attempts_backfill_signatures
    from apps.attempts.summaries import summary_refresh
    from apps.suites.models import Suite
    from apps.triage.clusters import _build_index, _scope, _stamp
    from apps.triage.selectors import queue_queryset
    from apps.triage.services import attempts_bulk_label, cluster_indexes_store

    a, b, _ = known
    client.force_login(bob)
    cluster_indexes_store(campaign_ids=[a.pk, b.pk])

    def served_equals_recount() -> tuple[str, list]:
        """The page as this warm process serves it (process copy or stored row) against a grouping of the attempts."""
        assert client.get("/triage/?view=grouped").status_code == 200
        served = cluster_index(user=bob, filters=QueueFilters())
        campaign_ids, filters = _scope(bob, QueueFilters())
        stamp = _stamp(campaign_ids, filters)
        assert served.stamp == stamp
        assert served.rows == _build_index(queue_queryset(user=bob, filters=filters), stamp).rows
        return stamp, served.rows

    stamp, rows = served_equals_recount()

    # A re-grade: (T1, 0) now shows (T1, 2)'s mistake. Same verdict and counts, another cluster.
    moved, model = Attempt.objects.get(pk=_ids(a, T1, 0)), Attempt.objects.get(pk=_ids(a, T1, 2))
    gradings_apply(
        changes=[
            GradingChange(
                attempt_id=moved.pk,
                verdict=model.verdict,
                categories=list(model.categories),
                clean_looking=model.clean_looking,
                diff=model.result["diff"],
                checks=model.result["checks"],
                rubrics=model.result.get("rubrics", []),
                task_hash=moved.task_hash,
            )
        ],
        task_hashes={moved.task_id: moved.task_hash},
        campaign_ids=[a.pk],
    )
    assert Attempt.objects.get(pk=moved.pk).failure_signature.digest == model.failure_signature.digest
    regraded_stamp, regraded_rows = served_equals_recount()
    assert (regraded_stamp, regraded_rows) != (stamp, rows)

    # Signatures dropped (as stored before they existed), then backfilled: only signatures_at changes.
    AttemptSignature.objects.filter(attempt__campaign=b).delete()
    summary_refresh(campaign_id=b.pk)
    unsigned_stamp, unsigned_rows = served_equals_recount()
    assert unsigned_rows != regraded_rows
    attempts_backfill_signatures(campaign_ids=[b.pk])
    signed_stamp, signed_rows = served_equals_recount()
    assert signed_stamp != unsigned_stamp and signed_rows == regraded_rows

    # A label: reviews only, read fresh by the page; the index and its stamp stay.
    signature = Attempt.objects.get(pk=moved.pk).failure_signature.digest
    attempts_bulk_label(
        attempts=Attempt.objects.filter(failure_signature__digest=signature),
        label=Label.objects.first(),
        actor=trish,
    )
    assert served_equals_recount() == (signed_stamp, signed_rows)

    # A suite revision rewrites task domains and tags in place: the stamp moves.
    Suite.objects.filter(pk=a.suite_id).update(updated_at=timezone.now())
    assert served_equals_recount()[0] != signed_stamp
