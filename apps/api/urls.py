"""Everything under /api/. Unknown /api/ paths end in a JSON 404 (after authentication)."""

from django.urls import path, re_path

from apps.api import (
    views_attempts,
    views_campaigns,
    views_catalog,
    views_clusters,
    views_config,
    views_drift,
    views_exports,
    views_meta,
    views_metrics,
    views_noise,
    views_regrade,
    views_training,
    views_triage,
)

app_name = "api"

urlpatterns = [
    path("api/schema/", views_meta.SchemaView.as_view(), name="schema"),
    path("api/docs/", views_meta.DocsView.as_view(url_name="api:schema"), name="docs"),
    path("api/suites/", views_catalog.SuiteListView.as_view(), name="suites"),
    path("api/suites/<int:pk>/", views_catalog.SuiteDetailView.as_view(), name="suite"),
    path("api/suites/<int:pk>/tasks/", views_catalog.SuiteTaskListView.as_view(), name="suite_tasks"),
    path("api/tasks/<int:pk>/", views_catalog.TaskDetailView.as_view(), name="task"),
    path("api/agents/", views_config.AgentListView.as_view(), name="agents"),
    path("api/agents/<int:pk>/", views_config.AgentDetailView.as_view(), name="agent"),
    path("api/price-sheets/", views_config.PriceSheetListView.as_view(), name="price_sheets"),
    path("api/price-sheets/<int:pk>/", views_config.PriceSheetDetailView.as_view(), name="price_sheet"),
    path("api/campaigns/", views_campaigns.CampaignListView.as_view(), name="campaigns"),
    path("api/campaigns/<int:pk>/", views_campaigns.CampaignDetailView.as_view(), name="campaign"),
    path(
        "api/campaigns/<int:pk>/progress/",
        views_campaigns.CampaignProgressView.as_view(),
        name="campaign_progress",
    ),
    path(
        "api/campaigns/<int:pk>/robustness/",
        views_campaigns.CampaignRobustnessView.as_view(),
        name="campaign_robustness",
    ),
    path(
        "api/campaigns/<int:pk>/launch/", views_campaigns.CampaignLaunchView.as_view(), name="campaign_launch"
    ),
    path(
        "api/campaigns/<int:pk>/cancel/", views_campaigns.CampaignCancelView.as_view(), name="campaign_cancel"
    ),
    path(
        "api/campaigns/<int:pk>/resume/", views_campaigns.CampaignResumeView.as_view(), name="campaign_resume"
    ),
    path(
        "api/campaigns/<int:pk>/replicate/",
        views_campaigns.CampaignReplicateView.as_view(),
        name="campaign_replicate",
    ),
    path("api/attempts/", views_attempts.AttemptListView.as_view(), name="attempts"),
    path("api/attempts/<int:pk>/", views_attempts.AttemptDetailView.as_view(), name="attempt"),
    path("api/metrics/leaderboard/", views_metrics.LeaderboardView.as_view(), name="leaderboard"),
    path("api/metrics/gap/", views_metrics.GapView.as_view(), name="gap"),
    path("api/metrics/cost/", views_metrics.CostView.as_view(), name="cost"),
    path("api/metrics/domains/", views_metrics.DomainsView.as_view(), name="domains"),
    path("api/metrics/compare/", views_metrics.CompareView.as_view(), name="compare"),
    path("api/metrics/noise/", views_noise.NoiseView.as_view(), name="noise"),
    path("api/metrics/replicates/", views_noise.ReplicatesView.as_view(), name="replicates"),
    path("api/training/pool/", views_training.TrainingPoolView.as_view(), name="training_pool"),
    path("api/planner/", views_noise.PlannerView.as_view(), name="planner"),
    path("api/gates/", views_noise.GateView.as_view(), name="gates"),
    path("api/regrades/", views_regrade.RegradeListView.as_view(), name="regrades"),
    path("api/regrades/<int:pk>/", views_regrade.RegradeDetailView.as_view(), name="regrade"),
    path("api/regrades/<int:pk>/apply/", views_regrade.RegradeApplyView.as_view(), name="regrade_apply"),
    path("api/watches/", views_drift.WatchListView.as_view(), name="watches"),
    path("api/watches/<int:pk>/", views_drift.WatchDetailView.as_view(), name="watch"),
    path("api/watches/<int:pk>/runs/", views_drift.WatchRunsView.as_view(), name="watch_runs"),
    path("api/watches/<int:pk>/run/", views_drift.WatchRunNowView.as_view(), name="watch_run_now"),
    path(
        "api/watch-runs/<int:pk>/acknowledge/",
        views_drift.RunAcknowledgeView.as_view(),
        name="run_acknowledge",
    ),
    path("api/watch-runs/<int:pk>/baseline/", views_drift.RunBaselineView.as_view(), name="run_baseline"),
    path("api/attempts/<int:pk>/review/", views_triage.AttemptReviewView.as_view(), name="attempt_review"),
    path("api/triage/labels/", views_triage.LabelListView.as_view(), name="labels"),
    path("api/clusters/", views_clusters.ClusterListView.as_view(), name="clusters"),
    path("api/suspect-tasks/", views_clusters.SuspectTaskListView.as_view(), name="suspect_tasks"),
    path("api/judges/", views_clusters.JudgeListView.as_view(), name="judges"),
    path("api/exports/tables/<slug:name>/", views_exports.TableExportView.as_view(), name="export_table"),
    path(
        "api/exports/procurement/", views_exports.ProcurementExportView.as_view(), name="export_procurement"
    ),
    path("api/exports/attempts/", views_exports.AttemptExportView.as_view(), name="export_attempts"),
    re_path(r"^api(?:/.*)?$", views_meta.UnknownEndpointView.as_view(), name="unknown"),
]
