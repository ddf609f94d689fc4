from django.urls import path

from apps.agents import views

app_name = "agents"

urlpatterns = [
    path("agents/", views.agent_list, name="list"),
    path("agents/new/", views.agent_create, name="create"),
    path("agents/<int:pk>/", views.agent_detail, name="detail"),
    path("agents/<int:pk>/test/", views.agent_test, name="test"),
    path("price-sheets/", views.price_sheet_list, name="price_sheets"),
    path("price-sheets/new/", views.price_sheet_new, name="price_sheet_new"),
    path("price-sheets/<int:pk>/", views.price_sheet_detail, name="price_sheet"),
]
