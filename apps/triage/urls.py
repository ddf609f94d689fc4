from django.urls import path

from apps.triage import views, views_clusters, views_suspects

app_name = "triage"

urlpatterns = [
    path("triage/", views.queue, name="queue"),
    path("triage/bulk/", views.bulk_label, name="bulk"),
    path("triage/summary/", views.summary, name="summary"),
    path("triage/health/", views.health, name="health"),
    path("triage/health/<int:pk>/resolve/", views.health_resolve, name="health_resolve"),
    path("triage/labels/", views.taxonomy, name="taxonomy"),
    path("triage/attempts/<int:pk>/panel/", views.attempt_panel, name="attempt_panel"),
    path("triage/tasks/<int:pk>/health/", views.task_health, name="task_health"),
    path("triage/attempts/<int:pk>/label/", views.attempt_label, name="attempt_label"),
    path("triage/attempts/<int:pk>/note/", views.attempt_note, name="attempt_note"),
    path("triage/attempts/<int:pk>/assign/", views.attempt_assign, name="attempt_assign"),
    path("triage/attempts/<int:pk>/status/", views.attempt_status, name="attempt_status"),
    path(
        "triage/attempts/<int:pk>/rubrics/<int:position>/verdict/",
        views_suspects.rubric_verdict,
        name="rubric_verdict",
    ),
    path("triage/clusters/act/", views_clusters.cluster_act, name="cluster_act"),
    path("triage/clusters/undo/", views_clusters.cluster_undo, name="cluster_undo"),
    path("triage/clusters/<str:signature>/", views_clusters.cluster, name="cluster"),
    path("triage/suspects/", views_suspects.suspects, name="suspects"),
    path("triage/suspects/<int:pk>/decide/", views_suspects.suspect_decide, name="suspect_decide"),
    path("triage/judges/", views_suspects.judges, name="judges"),
]
