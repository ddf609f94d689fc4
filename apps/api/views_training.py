"""Training pools over the API: the same pool document `select_training_pool` writes (SPEC §6 learning
zone or a band of the base pass rate, optionally only tasks a reference campaign solved at least once)."""

from __future__ import annotations

from django.http import Http404
from rest_framework import serializers
from rest_framework.response import Response

from apps.api.base import ApiView, api_schema, id_field
from apps.figures.selectors import figure_campaigns
from apps.training.selectors import (
    BAND_HI,
    BAND_LO,
    SELECT_ZONE,
    SELECTION_METHODS,
    EvaluationOnlyRefused,
    Selection,
    Thresholds,
    training_pool,
)
from tb_engine.metrics import LEARNING_ZONE_HI, LEARNING_ZONE_LO, LEARNING_ZONE_Q, MetricsInputError

TAGS = ["training"]


class PoolFilter(serializers.Serializer):
    campaign = id_field(help_text="Base campaign: the policy the pool is relative to.")
    select = serializers.ChoiceField(choices=SELECTION_METHODS, default=SELECT_ZONE)
    lo = serializers.FloatField(default=LEARNING_ZONE_LO, min_value=0, max_value=1)
    hi = serializers.FloatField(default=LEARNING_ZONE_HI, min_value=0, max_value=1)
    q = serializers.FloatField(default=LEARNING_ZONE_Q, min_value=0, max_value=1)
    band_lo = serializers.FloatField(
        default=BAND_LO, min_value=0, max_value=1, help_text="Lowest base c/n kept."
    )
    band_hi = serializers.FloatField(
        default=BAND_HI, min_value=0, max_value=1, help_text="Highest base c/n kept."
    )
    reference = id_field(required=False, help_text="Keep only tasks this campaign solved at least once.")
    allow_evaluation_only = serializers.BooleanField(default=False)


class PoolTaskOutput(serializers.Serializer):
    task_id = serializers.CharField()
    domain = serializers.CharField()
    n = serializers.IntegerField()
    c = serializers.IntegerField()
    p_zone = serializers.FloatField(help_text="P(lo < p < hi) under Beta(1 + c, 1 + n - c).")
    pass_rate = serializers.FloatField(help_text="c / n of the base campaign.")
    reference = serializers.DictField(
        child=serializers.IntegerField(), required=False, help_text="{n, c} of the reference campaign."
    )


class PoolOutput(serializers.Serializer):
    format = serializers.CharField()
    suite = serializers.DictField()
    base_campaign = serializers.DictField()
    thresholds = serializers.DictField()
    selection = serializers.DictField(help_text="method, band, reference_campaign, unsolved_by_reference.")
    candidates = serializers.IntegerField()
    tasks = PoolTaskOutput(many=True)


class TrainingPoolView(ApiView):
    @api_schema(
        summary="The training pool of a base campaign (the pool file's document)",
        tags=TAGS,
        parameters=[PoolFilter],
        responses={200: PoolOutput},
    )
    def get(self, request):
        query = self.validated_query(PoolFilter)
        ids = [query["campaign"]] + ([query["reference"]] if "reference" in query else [])
        by_id = {c.pk: c for c in figure_campaigns(request.user, ids=ids)}
        missing = [name for name in ("campaign", "reference") if name in query and query[name] not in by_id]
        if missing:
            raise Http404(f"no such campaign: {', '.join(missing)}")
        try:
            selection = Selection(
                query["select"], query["band_lo"], query["band_hi"], by_id.get(query.get("reference", 0))
            )
            pool = training_pool(
                by_id[query["campaign"]],
                Thresholds(query["lo"], query["hi"], query["q"]),
                selection,
                allow_evaluation_only=query["allow_evaluation_only"],
            )
        except (MetricsInputError, EvaluationOnlyRefused) as exc:
            raise serializers.ValidationError(
                {"campaign" if isinstance(exc, EvaluationOnlyRefused) else "thresholds": [str(exc)]}
            ) from exc
        return Response(PoolOutput(pool).data)
