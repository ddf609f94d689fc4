"""Agent configurations and price sheets: every viewer reads; operators create (and update agents).

A credential is never stored or accepted: an agent names the environment variable that holds
its key on the workers (api_key_env). A body carrying a key-like field is rejected, top level
or nested in `parameters` (e.g. a headers block with Authorization).
"""

from __future__ import annotations

from django.db import IntegrityError
from django.shortcuts import get_object_or_404
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from apps.agents.models import AgentConfig, PriceSheet
from apps.agents.selectors import agent_editable_by, agents_visible_to
from apps.agents.services import (
    AgentInUse,
    InvalidAgentConfig,
    agent_config_create,
    agent_config_problems,
    agent_config_update,
    api_key_env_refusal,
    base_url_refusal,
    price_sheet_create,
)
from apps.api.base import ApiView, api_schema, paginated
from apps.api.errors import Conflict
from apps.api.views_catalog import PageFilter
from apps.core.access import role_rank, teams_for
from apps.core.roles import Role
from tb_engine.agents.fault_personas import RETRY_PERSONAS
from tb_engine.agents.harness_checks import CHECKS
from tb_engine.agents.process_personas import PROCESS_PERSONAS
from tb_engine.agents.simulated import PERSONAS
from tb_engine.pricing import PriceSheetError

# Normalised (lowercase, '-' -> '_') names that would carry a secret rather than point at one.
SECRET_KEYS = {
    "api_key",
    "apikey",
    "authorization",
    "x_api_key",
    "secret",
    "password",
    "token",
    "access_token",
}
NO_KEYS = (
    "send no credentials: put the key in an environment variable on the workers and name it in api_key_env"
)


def _secret_paths(value, path: str) -> list[str]:
    found = []
    if isinstance(value, dict):
        for key, child in value.items():
            where = f"{path}.{key}" if path else str(key)
            if str(key).lower().replace("-", "_") in SECRET_KEYS:
                found.append(where)
            found += _secret_paths(child, where)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _secret_paths(child, f"{path}[{index}]")
    return found


class AgentOutput(serializers.ModelSerializer):
    is_simulation = serializers.BooleanField(read_only=True, help_text="Not a model.")
    is_harness_check = serializers.BooleanField(
        read_only=True, help_text="Golden replay or a harness check: tests the grader, not a model."
    )
    parameters = serializers.DictField(read_only=True)

    class Meta:
        model = AgentConfig
        fields = [
            "id",
            "name",
            "kind",
            "persona",
            "model",
            "base_url",
            "api_key_env",
            "parameters",
            "max_concurrency",
            "team",
            "is_simulation",
            "is_harness_check",
            "created_at",
        ]
        extra_kwargs = {"team": {"help_text": "The owning team (its operators edit it); null: shared."}}


class AgentInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(choices=AgentConfig.Kind.choices)
    persona = serializers.ChoiceField(
        choices=sorted(set(PERSONAS) | set(RETRY_PERSONAS) | set(PROCESS_PERSONAS) | set(CHECKS)),
        required=False,
        help_text="Simulated agents: the persona; harness checks (kind check): " + ", ".join(CHECKS) + ".",
    )
    model = serializers.CharField(max_length=200, required=False, allow_blank=True)
    base_url = serializers.URLField(max_length=500, required=False, allow_blank=True)
    api_key_env = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        help_text="Name of the environment variable holding the key on the workers (never the key itself); "
        "only names the administrator allows (TB_API_KEY_ENV_ALLOWED, default TB_KEY_*).",
    )
    parameters = serializers.DictField(
        required=False,
        help_text="OpenAI-compatible agents: endpoint fields (temperature, max_tokens, reasoning_effort, "
        "extra_headers, retry…) and agent options (end_marker, max_attempt_tokens, max_reply_chars, "
        "max_tool_result_chars); golden and simulated agents take none. Unknown or mistyped ones are a 400.",
    )
    max_concurrency = serializers.IntegerField(
        min_value=1,
        max_value=1024,
        required=False,
        help_text="Requests in flight to the agent's endpoint at once, across all workers (default 256).",
    )
    team = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="One of your teams (its operators edit the agent, its members use it); default: your only "
        "team. Null (shared: everyone uses it, administrators edit it) only for administrators.",
    )

    def to_internal_value(self, data):
        if isinstance(data, dict):
            # Checked before field validation, so a key is refused even when other fields are bad too.
            secrets = [key for key in data if str(key).lower().replace("-", "_") in SECRET_KEYS]
            secrets += _secret_paths(data.get("parameters"), "parameters")
            if secrets:
                raise serializers.ValidationError({name: [NO_KEYS] for name in secrets})
        return super().to_internal_value(data)

    def validate_api_key_env(self, value: str) -> str:
        refusal = api_key_env_refusal(value)
        if refusal:
            raise serializers.ValidationError(refusal)
        return value

    def validate_base_url(self, value: str) -> str:
        refusal = base_url_refusal(value)
        if refusal:
            raise serializers.ValidationError(refusal)
        return value

    def validate_team(self, value: int | None):
        user = self.context["request"].user
        if value is None:
            if role_rank(user) < Role.ADMIN.rank:
                raise serializers.ValidationError("only administrators make shared agents")
            return None
        team = teams_for(user).filter(pk=value).first()
        if team is None:
            raise serializers.ValidationError("not one of your teams")
        return team

    def validate_name(self, value: str) -> str:
        others = AgentConfig.objects.filter(name=value)
        if self.instance is not None:
            others = others.exclude(pk=self.instance.pk)
        if others.exists():
            raise serializers.ValidationError("an agent configuration with this name exists")
        return value

    def validate(self, data: dict) -> dict:
        if self.instance is None and "team" not in data:
            data["team"] = self._default_team()
        merged = {**self._current(), **data}
        if merged.get("kind") == AgentConfig.Kind.SIMULATED and not merged.get("persona"):
            raise serializers.ValidationError({"persona": ["required for simulated agents"]})
        if merged.get("kind") == AgentConfig.Kind.SIMULATED and merged.get("persona") not in {
            *PERSONAS,
            *RETRY_PERSONAS,
            *PROCESS_PERSONAS,
        }:
            raise serializers.ValidationError({"persona": ["not a simulated persona"]})
        if merged.get("kind") == AgentConfig.Kind.CHECK and merged.get("persona") not in CHECKS:
            raise serializers.ValidationError(
                {"persona": [f"required for harness checks: one of {', '.join(CHECKS)}"]}
            )
        if merged.get("kind") == AgentConfig.Kind.OPENAI and not merged.get("model"):
            raise serializers.ValidationError({"model": ["required for OpenAI-compatible agents"]})
        if "parameters" in data or "kind" in data:
            problems = agent_config_problems(kind=merged["kind"], parameters=merged.get("parameters") or {})
            if problems:
                raise serializers.ValidationError({field: [problem] for field, problem in problems.items()})
        return data

    def _default_team(self):
        """A new agent's team when none is given: the user's only team (an administrator's: shared)."""
        user = self.context["request"].user
        if role_rank(user) >= Role.ADMIN.rank:
            return None
        teams = list(teams_for(user)[:2])
        if len(teams) != 1:
            raise serializers.ValidationError(
                {"team": ["required: you belong to several teams" if teams else "you belong to no team"]}
            )
        return teams[0]

    def _current(self) -> dict:
        if self.instance is None:
            return {}
        return {
            "kind": self.instance.kind,
            "persona": self.instance.persona,
            "model": self.instance.model,
            "parameters": self.instance.parameters,
        }


class AgentListView(ApiView):
    roles = {"POST": Role.OPERATOR}

    @api_schema(
        summary="List agent configurations",
        operation_id="agents_list",
        tags=["agents"],
        parameters=[PageFilter],
        responses={200: paginated(AgentOutput)},
    )
    def get(self, request):
        self.validated_query(PageFilter)
        return self.paginate(agents_visible_to(request.user).order_by("name"), AgentOutput)

    @api_schema(
        summary="Create an agent configuration (operator)",
        tags=["agents"],
        request=AgentInput,
        responses={201: AgentOutput},
        errors=(400, 401, 403),
    )
    def post(self, request):
        data = self.validated_body(AgentInput)
        try:
            agent = agent_config_create(**data)
        except InvalidAgentConfig as exc:
            raise serializers.ValidationError(
                {field: [problem] for field, problem in exc.problems.items()}
            ) from exc
        except IntegrityError:  # a concurrent create with the same name won the race
            raise Conflict("an agent configuration with this name exists") from None
        return Response(AgentOutput(agent).data, status=status.HTTP_201_CREATED)


class AgentDetailView(ApiView):
    roles = {"PATCH": Role.OPERATOR}

    @api_schema(
        summary="One agent configuration",
        tags=["agents"],
        responses={200: AgentOutput},
        errors=(401, 403, 404),
    )
    def get(self, request, pk: int):
        return Response(AgentOutput(get_object_or_404(agents_visible_to(request.user), pk=pk)).data)

    @api_schema(
        summary="Update an agent configuration (operator)",
        tags=["agents"],
        request=AgentInput(partial=True),
        responses={200: AgentOutput},
        errors=(400, 401, 403, 404, 409),
        description="kind, persona, model, base_url and parameters cannot change once a campaign uses the agent "
        "(409). Operators edit their teams' agents only: another team's is a 404, a shared one a 403.",
    )
    def patch(self, request, pk: int):
        agent = get_object_or_404(agents_visible_to(request.user), pk=pk)
        if not agent_editable_by(agent, request.user):
            raise PermissionDenied("a shared agent: only administrators edit it")
        serializer = AgentInput(agent, data=request.data, partial=True, context={"request": request})
        serializer.is_valid(raise_exception=True)
        try:
            agent = agent_config_update(agent=agent, changes=serializer.validated_data)
        except AgentInUse as exc:
            raise Conflict(str(exc)) from exc
        except InvalidAgentConfig as exc:
            raise serializers.ValidationError(
                {field: [problem] for field, problem in exc.problems.items()}
            ) from exc
        return Response(AgentOutput(agent).data)


class ModelPriceInput(serializers.Serializer):
    input = serializers.DecimalField(
        max_digits=12, decimal_places=6, min_value=0, help_text="USD per million tokens."
    )
    output = serializers.DecimalField(max_digits=12, decimal_places=6, min_value=0)
    cached_input = serializers.DecimalField(max_digits=12, decimal_places=6, min_value=0, required=False)
    reasoning = serializers.DecimalField(max_digits=12, decimal_places=6, min_value=0, required=False)
    aliases = serializers.ListField(child=serializers.CharField(max_length=200), required=False)


class PriceSheetOutput(serializers.ModelSerializer):
    prices = serializers.DictField(
        child=serializers.DictField(),
        read_only=True,
        help_text="model -> {input, cached_input, output, reasoning} USD per million tokens.",
    )

    class Meta:
        model = PriceSheet
        fields = ["id", "name", "source", "effective_date", "prices", "created_at"]


class PriceSheetInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    source = serializers.CharField(  # type: ignore[assignment]  # DRF's metaclass moves declared fields out of the class: no clash with Field.source
        max_length=500, help_text="Where the prices come from (shown wherever cost is)."
    )
    effective_date = serializers.DateField()
    prices = serializers.DictField(
        child=ModelPriceInput(), allow_empty=False, help_text="model name -> prices"
    )

    def validate_name(self, value: str) -> str:
        if PriceSheet.objects.filter(name=value).exists():
            raise serializers.ValidationError("a price sheet with this name exists")
        return value


class PriceSheetListView(ApiView):
    roles = {"POST": Role.OPERATOR}

    @api_schema(
        summary="List price sheets",
        operation_id="price_sheets_list",
        tags=["price sheets"],
        parameters=[PageFilter],
        responses={200: paginated(PriceSheetOutput)},
    )
    def get(self, request):
        self.validated_query(PageFilter)
        return self.paginate(PriceSheet.objects.order_by("-effective_date", "name"), PriceSheetOutput)

    @api_schema(
        summary="Create a price sheet (operator)",
        tags=["price sheets"],
        request=PriceSheetInput,
        responses={201: PriceSheetOutput},
        errors=(400, 401, 403),
    )
    def post(self, request):
        data = self.validated_body(PriceSheetInput)
        models = {name: dict(entry.items()) for name, entry in data["prices"].items()}
        try:
            sheet = price_sheet_create(
                name=data["name"], source=data["source"], effective_date=data["effective_date"], models=models
            )
        except PriceSheetError as exc:
            raise serializers.ValidationError({"prices": [str(exc)]}) from exc
        except IntegrityError:
            raise Conflict("a price sheet with this name exists") from None
        return Response(PriceSheetOutput(sheet).data, status=status.HTTP_201_CREATED)


class PriceSheetDetailView(ApiView):
    @api_schema(
        summary="One price sheet",
        tags=["price sheets"],
        responses={200: PriceSheetOutput},
        errors=(401, 403, 404),
    )
    def get(self, request, pk: int):
        return Response(PriceSheetOutput(get_object_or_404(PriceSheet, pk=pk)).data)
