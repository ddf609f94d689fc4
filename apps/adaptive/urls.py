from django.urls import path

from apps.adaptive import views

app_name = "adaptive"

urlpatterns = [
    path("adaptive/", views.suite_list, name="suites"),
    path("adaptive/suites/<int:pk>/", views.suite_calibration, name="suite"),
    path("adaptive/campaigns/<int:pk>/", views.campaign_estimate, name="campaign"),
]
