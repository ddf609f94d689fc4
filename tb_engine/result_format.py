"""Reading a stored result's JSON one field at a time, naming the field's path when it is wrong.

``AttemptResult.from_dict`` and the ``from_dict`` of every type inside it read through these
readers, so a stored result that is not of a format this engine knows is refused with the field
at fault and the format version, never mis-read. Each reader takes the JSON object and a key; a
``default`` makes the field optional (fields added to the format after it was first stored).
Errors from a nested object carry the path inside it; ``nested``/``nested_list`` put the parent's
key in front, so the message names the whole path (``transcript.messages[3].role``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Final, NoReturn, TypeVar

T = TypeVar("T")
Choice = TypeVar("Choice", bound=str)
JsonObject = Mapping[str, Any]


class _Required:
    """The default of a field that must be present."""


REQUIRED: Final = _Required()
_ABSENT: Final = object()


class ResultFormatError(ValueError):
    """A stored result this engine cannot read: a field missing, of the wrong type or unknown, or an
    unknown format version. ``path`` is where in the result; ``version`` the format it claimed."""

    def __init__(self, problem: str, *, path: str = "", version: int | None = None) -> None:
        self.problem = problem
        self.path = path
        self.version = version
        super().__init__(self.message)

    @property
    def message(self) -> str:
        version = "" if self.version is None else f" (format version {self.version})"
        where = f"field {self.path} " if self.path else ""
        return f"stored result{version}: {where}{self.problem}"

    def inside(self, parent: str) -> ResultFormatError:
        """The same error seen from the object that holds ``parent`` (a key, or ``[index]``)."""
        path = (
            parent
            if not self.path
            else parent + (self.path if self.path.startswith("[") else "." + self.path)
        )
        return ResultFormatError(self.problem, path=path, version=self.version)

    def of_version(self, version: int) -> ResultFormatError:
        """The same error, naming the format version the result claimed."""
        return ResultFormatError(self.problem, path=self.path, version=version)


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _wrong(key: str, expected: str, value: Any) -> NoReturn:
    raise ResultFormatError(f"must be {expected}, got {json_type(value)}", path=key)


def _value(data: JsonObject, key: str, default: Any) -> Any:
    value = data.get(key, _ABSENT)
    if value is _ABSENT:
        if default is REQUIRED:
            raise ResultFormatError("is missing", path=key)
        return default
    return value


def json_object(value: Any, *, known: Collection[str]) -> JsonObject:
    """``value`` as a JSON object whose keys are all among ``known`` (a key the format does not have
    would be lost on reading, so it is refused rather than dropped)."""
    if not isinstance(value, Mapping):
        raise ResultFormatError(f"must be an object, got {json_type(value)}")
    for key in value:
        if key not in known:
            raise ResultFormatError("is not a field of this format", path=str(key))
    return value


def text(data: JsonObject, key: str, default: str | _Required = REQUIRED) -> str:
    value = _value(data, key, default)
    if not isinstance(value, str):
        _wrong(key, "a string", value)
    return value


def optional_text(data: JsonObject, key: str) -> str | None:
    """A string or null; absent reads as null."""
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        _wrong(key, "a string or null", value)
    return value


def integer(data: JsonObject, key: str, default: int | _Required = REQUIRED) -> int:
    value = _value(data, key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        _wrong(key, "an integer", value)
    return value


def number(data: JsonObject, key: str, default: float | _Required = REQUIRED) -> float:
    """A float; an integer is accepted (JSON writers may drop a whole number's ``.0``)."""
    value = _value(data, key, default)
    if not isinstance(value, int | float) or isinstance(value, bool):
        _wrong(key, "a number", value)
    return float(value)


def boolean(data: JsonObject, key: str, default: bool | _Required = REQUIRED) -> bool:
    value = _value(data, key, default)
    if not isinstance(value, bool):
        _wrong(key, "a boolean", value)
    return value


def optional_boolean(data: JsonObject, key: str) -> bool | None:
    """A boolean or null; must be present (null means something, e.g. an unjudged rubric)."""
    value = _value(data, key, REQUIRED)
    if value is not None and not isinstance(value, bool):
        _wrong(key, "a boolean or null", value)
    return value


def anything(data: JsonObject, key: str, default: Any = REQUIRED) -> Any:
    """Any JSON value (cell values, tool arguments and results)."""
    return _value(data, key, default)


def choice(
    data: JsonObject, key: str, options: tuple[Choice, ...], default: Choice | _Required = REQUIRED
) -> Choice:
    """One of ``options`` (a Literal's values)."""
    value = _value(data, key, default)
    for option in options:
        if value == option:
            return option
    shown = repr(value) if isinstance(value, str) else json_type(value)
    raise ResultFormatError(f"must be one of {', '.join(options)}, got {shown}", path=key)


def optional_choice(data: JsonObject, key: str, options: tuple[Choice, ...]) -> Choice | None:
    """One of ``options`` or null; absent reads as null."""
    if data.get(key) is None:
        return None
    return choice(data, key, options)


def free_object(data: JsonObject, key: str) -> dict[str, Any]:
    """A JSON object whose content this format does not fix (adapter evidence); absent reads as {}."""
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        _wrong(key, "an object", value)
    return dict(value)


def strings(data: JsonObject, key: str) -> list[str]:
    """A list of strings; absent reads as []."""
    values = _list(data, key)
    for index, value in enumerate(values):
        if not isinstance(value, str):
            _wrong(f"{key}[{index}]", "a string", value)
    return list(values)


def integers(data: JsonObject, key: str) -> tuple[int, ...]:
    """A list of integers as a tuple; absent reads as ()."""
    values = _list(data, key)
    for index, value in enumerate(values):
        if not isinstance(value, int) or isinstance(value, bool):
            _wrong(f"{key}[{index}]", "an integer", value)
    return tuple(values)


def numbers_by_name(data: JsonObject, key: str) -> dict[str, float]:
    """An object of numbers; absent reads as {}."""
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        _wrong(key, "an object", value)
    numbers = {}
    for name, item in value.items():
        if not isinstance(item, int | float) or isinstance(item, bool):
            _wrong(f"{key}.{name}", "a number", item)
        numbers[str(name)] = float(item)
    return numbers


def nested(data: JsonObject, key: str, read: Callable[[Any], T], default: Callable[[], T] | None = None) -> T:
    """The object under ``key`` read by ``read`` (a from_dict); errors inside name ``key``."""
    if key not in data:
        if default is None:
            raise ResultFormatError("is missing", path=key)
        return default()
    try:
        return read(data[key])
    except ResultFormatError as exc:
        raise exc.inside(key) from None


def nested_list(data: JsonObject, key: str, read: Callable[[Any], T]) -> list[T]:
    """The list under ``key``, each item read by ``read``; absent reads as []; errors name the item."""
    items = []
    for index, item in enumerate(_list(data, key)):
        try:
            items.append(read(item))
        except ResultFormatError as exc:
            raise exc.inside(f"{key}[{index}]") from None
    return items


def _list(data: JsonObject, key: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        _wrong(key, "an array", value)
    return value
