from __future__ import annotations

from django.contrib import admin

from .models import InferenceMetric


@admin.register(InferenceMetric)
class InferenceMetricAdmin(admin.ModelAdmin):
    list_display = [
        "interval_start",
        "variant",
        "host",
        "requests",
        "generated_tokens",
        "ttft_p99_ms",
        "e2e_p99_ms",
    ]
    list_filter = ["team", "engine"]
    list_select_related = ["variant__model", "host"]
    show_full_result_count = False
