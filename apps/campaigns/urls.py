from django.urls import path

from apps.campaigns import views

app_name = "campaigns"

urlpatterns = [
    path("campaigns/", views.campaign_list, name="list"),
    path("campaigns/new/", views.campaign_launch, name="launch"),
    path("campaigns/<int:pk>/", views.campaign_detail, name="detail"),
    path("campaigns/<int:pk>/cancel/", views.campaign_cancel_view, name="cancel"),
    path("campaigns/<int:pk>/resume/", views.campaign_resume_view, name="resume"),
    path("campaigns/<int:pk>/replicate/", views.campaign_replicate_view, name="replicate"),
]
