"""Issue 30: the leaderboard never ranks campaigns of different task sets or N against each other.

Two 20-attempt campaigns over four tasks of two domains (like the demo's) and one 3-attempt
campaign over two tasks of one domain. On its own figures the small campaign leads (all-N is
easier over 2 tasks with N = 3); on the common ground (the two shared tasks, k = 3) it does not,
and the page and the exports say what is compared.
"""

from __future__ import annotations

import csv
import io
from math import comb

import pytest
from playwright.sync_api import expect

from apps.dashboard.common_ground import common_ground
from tests.support.browser import signed_in_page

R1, R2 = "retail/ticket_hold_carrier_exception", "retail/damaged_replacement_not_refund"
N1, T1 = "neobank/freeze_misplaced_card", "travel/cancel_flexible_full_refund"


def export_rows(client) -> list[dict[str, str]]:
    """The leaderboard CSV's rows (after its '# key: value' About block) and its About lines."""
    text = client.get("/exports/tables/leaderboard.csv").content.decode()
    lines = text.splitlines()
    return list(csv.DictReader(io.StringIO("\n".join(line for line in lines if not line.startswith("#")))))


def pass_hat(n: int, c: int, k: int) -> float:
    """The unbiased pass^k of one task: C(c, k) / C(n, k)."""
    return comb(c, k) / comb(n, k)


@pytest.fixture
def three_campaigns(summaries_campaign):
    wide = summaries_campaign(
        {R1: (20, 20), R2: (20, 19), N1: (20, 5), T1: (20, 5)}, name="Wide twenty", n=20
    )
    other = summaries_campaign(
        {R1: (20, 20), R2: (20, 10), N1: (20, 20), T1: (20, 20)}, name="Other twenty", n=20
    )
    small = summaries_campaign({R1: (3, 3), R2: (3, 2)}, name="Small three", n=3)
    return wide, other, small


@pytest.mark.django_db
def test_leaderboard_ranks_different_tests_only_on_their_common_ground(client, bob, three_campaigns):
    wide, other, small = three_campaigns
    client.force_login(bob)

    response = client.get("/leaderboard/")
    html = response.content.decode()
    ground = response.context["ground"]

    assert ground.comparable is False
    assert ground.tasks == tuple(sorted((R1, R2)))
    assert ground.k == 3
    common = {
        "Wide twenty": (pass_hat(20, 20, 3) + pass_hat(20, 19, 3)) / 2,
        "Other twenty": (pass_hat(20, 20, 3) + pass_hat(20, 10, 3)) / 2,
        "Small three": (1.0 + 0.0) / 2,
    }
    assert {row.campaign.name: pytest.approx(row.pass_hat_k.value) for row in ground.rows.values()} == common
    # Own all-N would rank Other (3 of 4 tasks), Small (1 of 2), Wide (1 of 4); on the common ground
    # (the two retail tasks, k = 3) Wide leads with 92.5%, then Other 55.3%, then Small 50%.
    assert [row.campaign.name for row in response.context["rows"]] == [
        "Wide twenty",
        "Other twenty",
        "Small three",
    ]
    assert [ground.rows[c.pk].rank for c in (wide, other, small)] == ["1", "2", "3"]
    assert response.context["groups"] == [(None, response.context["rows"])]  # no own-figure bands
    assert 'id="common-ground"' in html
    assert "the 2 tasks all of them ran and k = 3 attempts" in html
    assert "Small three: 2 tasks, N = 3" in html
    assert "Rank on common ground" in html

    rows = {row["campaign"]: row for row in export_rows(client)}
    assert rows["Small three"]["rank on common ground"] == "3"
    assert rows["Wide twenty"]["common k"] == "3"
    assert rows["Wide twenty"]["common tasks"] == "2"
    assert "ranked on common ground" in rows["Small three"]["what is compared"]
    about = client.get("/exports/tables/leaderboard.csv").content.decode().splitlines()[0]
    assert about.startswith("# export: Leaderboard. These campaigns ran different tests")


@pytest.mark.django_db
def test_campaigns_of_one_test_keep_their_own_ranking_and_no_notice(client, bob, summaries_campaign):
    summaries_campaign({R1: (4, 4), R2: (4, 0)}, name="Always", n=4)
    summaries_campaign({R1: (4, 3), R2: (4, 3)}, name="Often", n=4)
    client.force_login(bob)

    response = client.get("/leaderboard/")

    assert response.context["ground"].comparable is True
    assert 'id="common-ground"' not in response.content.decode()
    assert [row.campaign.name for row in response.context["rows"]] == ["Always", "Often"]
    first = export_rows(client)[0]
    assert first["what is compared"].startswith("The same tasks and the same N")
    assert first["rank on common ground"] == ""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_leaderboard_in_chromium_says_what_it_compares(live_server, client, bob, three_campaigns):
    wide, other, small = three_campaigns
    with signed_in_page(live_server, client, bob) as page:
        page.goto(f"{live_server.url}/leaderboard/")
        notice = page.locator("#common-ground")
        expect(notice).to_be_visible()
        assert "share no task" not in notice.inner_text()
        assert "k = 3" in notice.inner_text()
        ranks = page.locator("#leaderboard tbody tr[data-campaign] td.ground-rank").all_inner_texts()
        names = page.locator("#leaderboard tbody tr[data-campaign] td.name a").all_inner_texts()
        assert list(zip(ranks, names)) == [("1", "Wide twenty"), ("2", "Other twenty"), ("3", "Small three")]
        assert page.locator("th.ground").first.text_content().startswith("pass^3 common")
        # Filtered to travel: only the two 20-attempt campaigns ran it, one test, so no notice.
        with page.expect_response(lambda response: "domain=travel" in response.url):
            page.select_option("#filter-domain", "travel")
        expect(page.locator("#common-ground")).to_have_count(0)
        assert page.locator("#leaderboard tbody tr[data-campaign] td.rank").count() == 3  # own bands again
        assert page.errors == []


@pytest.mark.django_db
def test_campaigns_without_a_common_task_are_not_ranked_against_each_other(client, bob, summaries_campaign):
    summaries_campaign({R1: (4, 4)}, name="Retail only", n=4)
    summaries_campaign({N1: (3, 3)}, name="Neobank only", n=3)
    client.force_login(bob)

    response = client.get("/leaderboard/")

    ground = response.context["ground"]
    assert ground.comparable is False and ground.tasks == ()
    assert [row.rank for row in ground.rows.values()] == ["—", "—"]
    assert "share no task, so they are not ranked against each other" in response.content.decode()
    summaries_campaign({R1: (2, 2)}, name="Retail two", n=2)
    sliced = client.get(
        "/leaderboard/?domain=retail&sort=name&healthy=exclude"
    )  # Neobank only has no row there
    assert sliced.status_code == 200
    assert sliced.context["ground"].comparable is False  # N = 4 beside N = 2 on the one retail task


def computed_from_tables(campaigns, **slice_) -> object:
    """The common ground computed from the per-task tables, as before any shortcut or stored row."""
    from apps.dashboard import common_ground as module

    tables = module.figures.per_task_tables(list(campaigns), exclude=slice_.pop("exclude", frozenset()))
    return module._bound(module._computed(list(campaigns), tables, **slice_), list(campaigns))


@pytest.mark.django_db
def test_one_test_is_recognised_without_loading_a_table(
    summaries_campaign, monkeypatch, django_assert_max_num_queries
):
    from apps.figures import tables
    from apps.figures.tables import forget_process_figures

    always = summaries_campaign({R1: (4, 4), R2: (4, 0)}, name="Always", n=4)
    often = summaries_campaign({R1: (4, 3), R2: (4, 3)}, name="Often", n=4)
    small = summaries_campaign({R1: (3, 3)}, name="Small", n=3)
    expected = {
        (): computed_from_tables([always, often], domain="", tag=""),
        ("retail",): computed_from_tables([always, often, small], domain="retail", tag=""),
        ("travel",): computed_from_tables([always, often, small], domain="travel", tag=""),
    }

    def no_tables(*args, **kwargs):
        raise AssertionError("one test: the tables are not needed")

    forget_process_figures()
    monkeypatch.setattr(tables, "_stored_frames", no_tables)
    # Cold: the stamps, the stored slot, the two membership queries, the store (three statements).
    with django_assert_max_num_queries(7):
        same = common_ground([always, often])
    # Warm (this process already decided at these stamps): the stamps only, no membership scan.
    with django_assert_max_num_queries(1):
        assert common_ground([always, often]) == same
    assert same == expected[()]
    assert same.comparable is True and same.tasks == tuple(sorted((R1, R2)))
    assert same.kinds == ((4, 2, ("Always", "Often")),)
    assert (
        common_ground([always, often, small], domain="travel") == expected[("travel",)]
    )  # nobody ran travel
    with pytest.raises(AssertionError, match="not needed"):  # N = 4 beside N = 3: the tables decide
        common_ground([always, often, small], domain="retail")
    assert expected[("retail",)].comparable is False


@pytest.mark.django_db
def test_common_ground_of_different_tests_is_stored_at_the_tables_version(summaries_campaign, monkeypatch):
    from apps.attempts.models import TaskSummary
    from apps.figures import tables
    from apps.figures.tables import forget_process_figures

    wide = summaries_campaign({R1: (20, 20), R2: (20, 19)}, name="Wide", n=20)
    small = summaries_campaign({R1: (3, 3), R2: (3, 2)}, name="Small", n=3)
    first = common_ground([wide, small])
    assert first.comparable is False and first == computed_from_tables([wide, small], domain="", tag="")
    forget_process_figures()  # a fresh server process: the stored row answers, no table is built

    def no_frames(ids):
        raise AssertionError("stored: no table needed")

    with monkeypatch.context() as patched:
        patched.setattr(tables, "per_task_frames", no_frames)
        assert common_ground([wide, small]) == first

    TaskSummary.objects.filter(campaign=small, task__task_id=R2).update(n_pass=3)  # a re-grade: new stamp
    regraded = common_ground([wide, small])
    assert regraded.rows[small.pk].pass_hat_k.value == pytest.approx(1.0)
    assert [row.rank for row in regraded.rows.values()] == ["1", "2"]
    assert regraded.rows[small.pk].rank == "1"
    assert regraded == computed_from_tables([wide, small], domain="", tag="")
