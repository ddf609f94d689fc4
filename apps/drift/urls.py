from django.urls import path

from apps.drift import views

app_name = "drift"

urlpatterns = [
    path("drift/", views.watch_list, name="list"),
    path("drift/new/", views.watch_create, name="create"),
    path("drift/<int:pk>/", views.watch_detail, name="detail"),
    path("drift/<int:pk>/run/", views.watch_run_now, name="run_now"),
    path("drift/<int:pk>/toggle/", views.watch_toggle, name="toggle"),
    path("drift/<int:pk>/delete/", views.watch_delete, name="delete"),
    path("drift/runs/<int:pk>/acknowledge/", views.run_acknowledge, name="acknowledge"),
    path("drift/runs/<int:pk>/baseline/", views.run_baseline, name="baseline"),
]
