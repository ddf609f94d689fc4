from django.urls import path

from apps.dashboard import views, views_attempts, views_decide, views_noise, views_suites

app_name = "dashboard"

urlpatterns = [
    path("leaderboard/", views.leaderboard, name="leaderboard"),
    path("leaderboard/scores/", views.external_score_add, name="external_score_add"),
    path("glossary/", views.glossary, name="glossary"),
    path("gap/", views.gap, name="gap"),
    path("cost/", views.cost, name="cost"),
    path("domains/", views.domains, name="domains"),
    path("tasks/", views.tasks, name="tasks"),
    path("tasks/<int:pk>/", views.task_detail, name="task"),
    path("compare/", views.compare, name="compare"),
    path("decide/", views_decide.decide_page, name="decide"),
    path("noise/", views_noise.noise, name="noise"),
    path("planner/", views_noise.planner, name="planner"),
    path("attempts/<int:pk>/", views_attempts.attempt_detail, name="attempt"),
    path("attempts/<int:pk>/raw.json", views_attempts.attempt_raw, name="attempt_raw"),
    path("suites/", views_suites.suite_list, name="suites"),
    path("suites/<int:pk>/", views_suites.suite_detail, name="suite"),
    path("suites/<int:pk>/validate/", views_suites.suite_validate, name="suite_validate"),
]
