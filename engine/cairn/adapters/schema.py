"""Pydantic types derived from the catalogue of operations (cairn.operations).

The MCP tools' parameters (the JSON schema the model sees) and the HTTP API's body and query models
are built here from the same `Arg`s, so they hold the bounds, choices and defaults declared there.

    annotated(ops.RECALL.arg("k"))     # Annotated[int | None, Field(ge=1, le=200, description=...)]
    model(ops.RECALL, "RecallBody")    # a BaseModel with one field per argument, unknown keys refused
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from cairn import operations as ops

_PYTHON = {"str": str, "int": int, "bool": bool, "time": str}


def _bounds(arg: ops.Arg) -> dict[str, Any]:
    """Field constraints for one value: ge/le for an int, min/max characters for a str."""
    if arg.choices or arg.type == "bool":
        return {}
    if arg.type == "int":
        return {k: v for k, v in (("ge", arg.low), ("le", arg.high)) if v is not None}
    return {k: v for k, v in (("min_length", arg.low), ("max_length", arg.high)) if v is not None}


def annotated(arg: ops.Arg, *, help: str | None = None) -> Any:  # noqa: A002 - the catalogue's word
    """The argument's type as pydantic reads it: Annotated[T, Field(bounds, description)], with T
    optional when its default is None. A list's items carry the per-value bounds; the list, its
    length. help: the description instead of the argument's own ("": none)."""
    value: Any = Literal[arg.choices] if arg.choices else _PYTHON[arg.type]
    description = arg.help if help is None else (help or None)
    if arg.many:
        item = Annotated[value, Field(**_bounds(arg))] if _bounds(arg) else value
        typ: Any = list[item]  # type: ignore[valid-type]
        if not arg.required and arg.default is None:
            typ = typ | None
        return Annotated[typ, Field(description=description, max_length=arg.items)]
    if not arg.required and arg.default is None:
        value = value | None
    return Annotated[value, Field(description=description, **_bounds(arg))]


def default(arg: ops.Arg) -> Any:
    """The default as a JSON value (a list for a list), or ... when the argument is required."""
    if arg.required:
        return ...
    return list(arg.default) if arg.many and arg.default is not None else arg.default


class Strict(BaseModel):
    """A model that refuses keys it does not know (a misspelt option must not be ignored)."""

    model_config = ConfigDict(extra="forbid")


def model(op: ops.Operation, name: str, *, args: Iterable[ops.Arg] | None = None,
          rename: Mapping[str, str] | None = None) -> type[Strict]:
    """A pydantic model called `name` with one field per argument of `op` (or of `args`, taken from
    it), unknown keys refused. rename: field names that differ from the engine keyword (the HTTP
    query string's repeated `kind=` for `kinds`); `engine_kwargs` maps them back."""
    rename = dict(rename or {})
    fields = {rename.get(a.name, a.name): (annotated(a), default(a)) for a in (op.args if args is None else args)}
    made = create_model(name, __base__=Strict, **fields)  # type: ignore[call-overload]
    made.__doc__ = op.summary
    made._engine_names = {v: k for k, v in rename.items()}
    return made


def engine_kwargs(values: BaseModel) -> dict[str, Any]:
    """A checked model's values as the engine's keywords (renamed fields back to their names)."""
    names: dict[str, str] = getattr(type(values), "_engine_names", {})
    return {names.get(k, k): v for k, v in values.model_dump().items()}
