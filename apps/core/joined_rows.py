"""Hot reads written as SQL once per process: a model's rows with some of its to-one relations joined,
built into model instances as `select_related` builds them (same fields, same cached relations).

Compiling an ORM query is Python work on every request: for the figure pages' campaign list and the
attempt drilldown's attempt (four to six joined tables each) it was a tenth to a quarter of a warm
request's Python (cProfile, thread time, bench/dashboard_concurrency.py's database), more than
PostgreSQL spent answering. A `JoinedRows` builds its SELECT ... FROM ... JOIN text and its row
layout from the models' metadata once; the caller adds a WHERE clause with parameters. Values pass
through each field's database converters, as the ORM's reads do (JSON decoded, for instance).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.db import connection
from django.db.models import Model

ModelT = TypeVar("ModelT", bound=Model)


@dataclass(frozen=True)
class _Columns:
    """One model's columns in a joined row: where they sit, their attribute names and converters."""

    model: type[Model]
    start: int
    attnames: tuple[str, ...]
    converters: tuple[tuple[int, tuple[Any, ...], Any], ...]  # (position, converters, column expression)

    def instance(self, row: Sequence[Any]) -> Model:
        values = list(row[self.start : self.start + len(self.attnames)])
        for position, converters, expression in self.converters:
            for converter in converters:
                values[position] = converter(values[position], expression, connection)
        return self.model.from_db(connection.alias, self.attnames, values)


@dataclass(frozen=True)
class _Join:
    """A relation joined to its parent (the base row or an earlier join)."""

    parent: int  # index into the layout's joins, -1 for the base model
    relation: Any  # the forward field (ForeignKey, OneToOneField) or the reverse one-to-one
    forward: bool
    columns: _Columns


@dataclass(frozen=True)
class _Layout:
    select: str
    base: _Columns
    joins: tuple[_Join, ...]


class JoinedRows(Generic[ModelT]):
    """Rows of `model` with the to-one `related` paths joined ("campaign__agent", a reverse
    one-to-one such as "process_risk"); `defer` maps a path ("" = the base model) to fields left
    unloaded, as QuerySet.defer does. The base table's alias is "b"; join aliases are "j0", "j1", ...
    in the order of `related` (parents first, as select_related needs them)."""

    def __init__(
        self, model: type[ModelT], related: Iterable[str], *, defer: dict[str, Iterable[str]] | None = None
    ) -> None:
        self.model = model
        self.related = tuple(related)
        self.defer = {path: frozenset(names) for path, names in (defer or {}).items()}
        self._layouts: dict[str, _Layout] = {}
        self._lock = threading.Lock()

    def alias(self, path: str) -> str:
        """The SQL alias of `path` ("" = the base model), for the caller's WHERE clause."""
        return "b" if path == "" else f"j{self.related.index(path)}"

    def fetch(self, where: str = "", params: Sequence[Any] = (), order_by: str = "") -> list[ModelT]:
        """The rows matching `where` (SQL over the aliases, `%s` placeholders), in `order_by` order."""
        layout = self._layout()
        sql = (
            layout.select
            + (f" WHERE {where}" if where else "")
            + (f" ORDER BY {order_by}" if order_by else "")
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, list(params))
            rows = cursor.fetchall()
        return [self._build(layout, row) for row in rows]

    def _build(self, layout: _Layout, row: Sequence[Any]) -> ModelT:
        base = layout.base.instance(row)
        loaded: list[Model | None] = []
        for join in layout.joins:
            parent = base if join.parent < 0 else loaded[join.parent]
            present = row[
                join.columns.start + join.columns.attnames.index(join.columns.model._meta.pk.attname)
            ]
            other = join.columns.instance(row) if present is not None and parent is not None else None
            loaded.append(other)
            if parent is None:
                continue
            # What select_related caches on both sides: a missing row reads None forward and raises
            # DoesNotExist through a reverse one-to-one, as after the ORM's own read.
            if join.forward:
                join.relation.set_cached_value(parent, other)
                if other is not None and join.relation.one_to_one:
                    join.relation.remote_field.set_cached_value(other, parent)
            else:
                join.relation.set_cached_value(parent, other)
                if other is not None:
                    join.relation.field.set_cached_value(other, parent)
        return base  # type: ignore[return-value]

    def _layout(self) -> _Layout:
        key = connection.vendor
        layout = self._layouts.get(key)
        if layout is None:
            with self._lock:
                layout = self._layouts.get(key) or self._build_layout()
                self._layouts[key] = layout
        return layout

    def _build_layout(self) -> _Layout:
        selected: list[str] = []
        base = self._columns(self.model, "b", "", selected)
        models: dict[str, tuple[type[Model], str, bool]] = {
            "": (self.model, "b", False)
        }  # path -> model, alias, outer
        joins: list[_Join] = []
        clauses: list[str] = []
        for position, path in enumerate(self.related):
            parent_path, _, name = path.rpartition("__")
            if parent_path not in models:
                raise ValueError(f"join {parent_path!r} before {path!r}")
            parent_model, parent_alias, parent_outer = models[parent_path]
            relation: Any = parent_model._meta.get_field(name)
            alias = f"j{position}"
            if relation.concrete and (relation.many_to_one or relation.one_to_one):
                target: type[Model] = relation.related_model
                on = f'"{alias}"."{target._meta.pk.column}" = "{parent_alias}"."{relation.column}"'
                outer = parent_outer or relation.null
                forward = True
            elif relation.one_to_one:  # a reverse one-to-one: the other table holds the key
                target = relation.related_model
                on = (
                    f'"{alias}"."{relation.field.column}" = "{parent_alias}"."{parent_model._meta.pk.column}"'
                )
                outer, forward = True, False
            else:
                raise ValueError(f"{path!r} is not a to-one relation of {parent_model.__name__}")
            columns = self._columns(target, alias, path, selected)
            kind = "LEFT OUTER JOIN" if outer else "INNER JOIN"
            clauses.append(f'{kind} "{target._meta.db_table}" "{alias}" ON {on}')
            parent_index = -1 if parent_path == "" else self.related.index(parent_path)
            joins.append(_Join(parent_index, relation, forward, columns))
            models[path] = (target, alias, outer)
        select = f'SELECT {", ".join(selected)} FROM "{self.model._meta.db_table}" "b" {" ".join(clauses)}'
        return _Layout(select.rstrip(), base, tuple(joins))

    def _columns(self, model: type[Model], alias: str, path: str, selected: list[str]) -> _Columns:
        deferred = self.defer.get(path, frozenset())
        fields = [
            field
            for field in model._meta.concrete_fields
            if field.name not in deferred and field.attname not in deferred
        ]
        converters = []
        for position, field in enumerate(fields):
            expression = field.get_col(alias)
            found = connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)
            if found:
                converters.append((position, tuple(found), expression))
        start = len(selected)
        selected.extend(f'"{alias}"."{field.column}"' for field in fields)
        return _Columns(model, start, tuple(field.attname for field in fields), tuple(converters))


def column_reader(model: type[Model], field_name: str, alias: str) -> Callable[[Any], Any]:
    """A function turning `model.field_name`'s raw value, as a cursor returns it from the column
    aliased `alias`, into what the ORM would give (a datetime from SQLite's text, decoded JSON)."""
    field = model._meta.get_field(field_name)
    expression = field.get_col(alias)  # type: ignore[union-attr]
    converters = connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)

    def read(value: Any) -> Any:
        for converter in converters:
            value = converter(value, expression, connection)
        return value

    return read
