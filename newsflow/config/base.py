"""The one mechanism of the configuration sections: :class:`Section` (strict, frozen) and
:func:`section_from`, which generates a section from a step's frozen dataclass (its keys,
types and defaults), and :func:`dataclass_kwargs`, which turns such a section back into the
dataclass's arguments."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

__all__ = ["HOUR_MS", "ConfigError", "Section", "dataclass_kwargs", "section_from", "to_hours", "to_ms"]

HOUR_MS = 3_600_000


class ConfigError(ValueError):
    """A configuration mistake, as one line naming the key or environment variable."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def to_hours(ms: int) -> float:
    return ms / HOUR_MS


def to_ms(hours: float) -> int:
    return round(hours * HOUR_MS)


#: generated section -> its dataclass fields given in hours: {field (ms): key (hours)}
_HOURS: dict[type, dict[str, str]] = {}


def section_from(cls: type, name: str, module: str, *, exclude: tuple[str, ...] = (),
                 base: Any = None, hours: Mapping[str, str] | None = None,
                 **overrides: tuple[Any, dict[str, Any]]) -> type[Section]:
    """A section whose keys, types and defaults are those of the frozen dataclass ``cls``:
    numbers must be >= 0 unless ``overrides`` gives ``(type, Field kwargs)`` for a field.
    ``hours`` names the fields in milliseconds that operators set in hours, and their keys
    (``window_ms`` -> ``window_hours``); :func:`dataclass_kwargs` converts them back. ``module``:
    the module that holds the section (its name there is ``name``, so that it pickles)."""
    hints = get_type_hints(cls)
    defaults = base if base is not None else cls()
    hours = dict(hours or {})
    spec: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in exclude:
            continue
        tp, kw = overrides.get(f.name, (hints[f.name], {"ge": 0} if hints[f.name] in (int, float) else {}))
        default = getattr(defaults, f.name)
        if f.name in hours:
            spec[hours[f.name]] = (tp, Field(to_hours(default), **kw))
        else:
            spec[f.name] = (tp, Field(default, **kw))
    model = create_model(name, __base__=Section, __doc__=f"Builds ``{cls.__name__}``.", **spec)
    model.__module__ = module
    _HOURS[model] = hours
    return model


def dataclass_kwargs(section: Any, exclude: AbstractSet[str] = frozenset()) -> dict[str, Any]:
    """A generated section (see :func:`section_from`) as keyword arguments of its dataclass
    (without the keys in ``exclude``, which a subclass adds)."""
    d = dict(section.model_dump(exclude=set(exclude)))
    hours = next(_HOURS[c] for c in type(section).__mro__ if c in _HOURS)
    for field, key in hours.items():
        d[field] = to_ms(d.pop(key))
    return d
