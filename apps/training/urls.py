from django.urls import path

from apps.training import views

app_name = "training"

urlpatterns = [
    path("training/", views.pools, name="pools"),
    path("training/report/", views.report, name="report"),
]
