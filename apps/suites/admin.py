from django.contrib import admin

from apps.suites.models import Domain, Suite, Task


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "source", "evaluation_only", "updated_at")


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    list_display = ("name", "suite", "title", "backend")
    list_filter = ("suite",)


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("task_id", "suite", "domain", "validation")
    list_filter = ("suite", "domain", "validation")
    search_fields = ("task_id", "title")
