from django.urls import path

from apps.core import views

app_name = "core"

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("system/workers/", views.workers, name="workers"),
    path("system/workers/ping/", views.ping_workers, name="ping_workers"),
]
