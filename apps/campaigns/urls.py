from django.urls import path

from apps.campaigns import views

app_name = "campaigns"

urlpatterns = [
    path("", views.campaign_list, name="list"),
    path("new/", views.campaign_launch, name="launch"),
    path("<int:pk>/", views.campaign_detail, name="detail"),
    path("<int:pk>/cancel/", views.campaign_cancel_view, name="cancel"),
    path("<int:pk>/resume/", views.campaign_resume_view, name="resume"),
]
