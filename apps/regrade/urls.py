from django.urls import path

from apps.regrade import views

app_name = "regrade"

urlpatterns = [
    path("regrades/", views.regrade_list, name="list"),
    path("regrades/start/", views.regrade_start, name="start"),
    path("regrades/<int:pk>/", views.regrade_detail, name="detail"),
    path("regrades/<int:pk>/apply/", views.regrade_apply_view, name="apply"),
    path("regrades/<int:pk>/report.xlsx", views.regrade_xlsx, name="xlsx"),
    path("regrades/campaigns/<int:pk>/versions/", views.campaign_versions, name="versions"),
]
