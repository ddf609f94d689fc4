from django.urls import path

from apps.exports import views

app_name = "exports"

urlpatterns = [
    path("exports/tables/<slug:name>.<str:fmt>", views.table, name="table"),
    path("exports/procurement/", views.procurement_workbook, name="procurement"),
    path("exports/attempts.<str:fmt>", views.attempts, name="attempts"),
]
