"""The tree and its loading: :class:`Settings` (every section), the TOML file and the
``NEWSFLOW_*`` variables merged over the defaults (strict: errors name the key or the
variable), where each value came from, and ``config show``'s output."""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError
from pydantic_settings import EnvSettingsSource

from newsflow.config.base import ConfigError, Section
from newsflow.config.services import KafkaSettings, PollerSettings, ProfilesSettings
from newsflow.config.steps import (
    DedupSettings,
    DigestSettings,
    FlowSettings,
    NormalizeSettings,
    ScoringSettings,
    StorySettings,
    TopicSettings,
)

__all__ = [
    "ALL_PATHS",
    "ENV_DELIMITER",
    "ENV_PREFIX",
    "MOVED",
    "REMOVED",
    "RESERVED_ENV",
    "Settings",
    "leaf_paths",
    "load_settings",
    "load_with_sources",
    "read_config_file",
    "read_env",
    "show",
]

ENV_PREFIX = "NEWSFLOW_"
ENV_DELIMITER = "__"
#: ``NEWSFLOW_*`` variables that are not configuration keys (inputs of entry points, dev tools)
RESERVED_ENV = frozenset({
    "NEWSFLOW_CONFIG",  # the configuration file itself
    "NEWSFLOW_INPUT", "NEWSFLOW_OUT", "NEWSFLOW_UNTIL_EOF",  # newsflow.flows.entry
    "NEWSFLOW_SHARED",  # tests: the shared data directory
    "NEWSFLOW_KAFKA_VERSION", "NEWSFLOW_KAFKA_LIBS", "NEWSFLOW_CACHE_DIR", "NEWSFLOW_KAFKA_CDS",  # kafka_local.py
})


# ------------------------------------------------------------------------------ the tree
class Settings(Section):
    """The whole configuration; every component gets its part from here."""

    flow: FlowSettings = FlowSettings()
    normalize: NormalizeSettings = NormalizeSettings()
    dedup: DedupSettings = DedupSettings()
    stories: StorySettings = StorySettings()
    scoring: ScoringSettings = ScoringSettings()
    topics: TopicSettings = TopicSettings()
    digests: DigestSettings = DigestSettings()
    poller: PollerSettings = PollerSettings()
    kafka: KafkaSettings = KafkaSettings()
    profiles: ProfilesSettings = ProfilesSettings()


#: what old flat keys became (shown in the "unknown key" message)
MOVED = {
    "dedup_window_ms": "dedup.window_hours", "dedup_shards": "dedup.shards",
    "emit_repolls": "dedup.emit_repolls", "story_shards": "stories.shards", "tick_ms": "flow.tick_seconds",
    "live_tick_ms": "flow.live_tick_seconds",
    "digest_tz": "digests.tz", "rolling_minutes": "digests.rolling_minutes",
    "future_tolerance_ms": "normalize.future_tolerance_seconds", "reading_wpm": "normalize.reading_wpm",
    "partial_max_words": "normalize.partial_max_words", "fast_parse": "normalize.fast_parse",
    "blob_dir": "flow.blob_dir", "max_record_bytes": "flow.max_record_bytes",
    "validate_outputs": "flow.validate_outputs", "clock_jump_tolerance_ms": "flow.clock_jump_tolerance_hours",
    "max_payload_bytes": "normalize.max_payload_bytes", "max_items_per_payload": "normalize.max_items_per_payload",
    "max_item_body_chars": "normalize.max_item_body_chars",
    "max_deadletter_original_bytes": "normalize.max_deadletter_original_bytes",
    "kafka_timeout_s": "kafka.timeout_s",
    "poison_after_crashes": "flow.poison_after_crashes",
    "newsflow": "(no [newsflow] table: sections are top-level, e.g. [dedup])",
    "poller.topics": "[kafka.topics] (one set of topic names for the poller and the flow)",
}


#: keys that no longer exist (shown in the "unknown key" message): the story step is one
#: algorithm, and the values nobody tunes per deployment are constants of its modules
REMOVED = dict.fromkeys(
    (f"stories.{k}" for k in (
        "preset", "slab_hours", "title_measure", "short_title_words", "content_measure",
        "minhash_threshold", "simhash_max_hamming", "num_perm", "lsh_bands", "lsh_rows",
        "body_shingle_words", "min_sentence_matches", "entity_threshold", "entity_min_keys",
        "same_event_hours", "use_entity_layer", "story_match", "story_threshold_decay",
        "bigram_weight", "slug_weight", "body_term_words", "body_term_weight",
        "centroid_max_terms", "reopen_closed_stories", "story_score", "story_min_average",
        "story_generic_df", "story_min_specific", "story_min_concepts", "same_publisher_factor",
        "follow_same_publisher_duplicates", "redundancy_low", "redundancy_high",
        "redundancy_min_articles", "redundancy_memory", "story_threshold_decay_dense",
        "story_merge_dense", "story_merge_reach", "story_date_veto", "story_name_veto",
        "story_name_boost", "story_name_rare_df", "story_name_min_shared")),
    'the story step has one algorithm; its keys are listed in docs/user-guide.md, "Stories"',
)


# ------------------------------------------------------------------------------ loading
def _paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every key path of the tree (sections and leaves)."""
    for name, f in model.model_fields.items():
        p = (*prefix, name)
        yield p
        tp = f.annotation
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            yield from _paths(tp, p)


ALL_PATHS = [".".join(p) for p in _paths(Settings)]


def _env_name(path: tuple[str, ...] | str) -> str:
    parts = path.split(".") if isinstance(path, str) else path
    return ENV_PREFIX + ENV_DELIMITER.join(p.upper() for p in parts)


def _suggest(word: str, choices: list[str]) -> str:
    near = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(x) for x in loc if not str(x).startswith(("function-", "tagged-union")))


def _describe(err: Mapping[str, Any], where: str, key: str) -> str:
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        if key in REMOVED:
            return f"{where}unknown key {key!r}: removed ({REMOVED[key]})"
        last = key.rsplit(".", 1)[-1]
        if key in MOVED or last in MOVED:
            return f"{where}unknown key {key!r}: it is now {MOVED.get(key, MOVED.get(last))}"
        near = difflib.get_close_matches(key, ALL_PATHS + list(MOVED), n=1, cutoff=0.6)
        hint = f" (did you mean {MOVED.get(near[0], near[0])!r}?)" if near else ""
        return f"{where}unknown key {key!r}{hint}"
    got = err.get("input")
    shown = f" = {got!r}" if got is not None and not isinstance(got, dict | list) else ""
    return f"{where}{key}{shown}: {msg}"


def _errors(e: ValidationError, where: str, env_names: Mapping[str, str] | None = None) -> ConfigError:
    out = []
    for err in e.errors():
        key = _loc(err["loc"])
        if env_names is not None:  # name the variable, not the key
            var = next((v for k, v in env_names.items() if key == k or key.startswith(k + ".")), None)
            if var is not None:
                msg = str(err["msg"]).removeprefix("Value error, ")
                got = err.get("input")
                out.append(f"{var}={got!r}: {msg} (key {key})" if isinstance(got, str | int | float)
                           else f"{var}: {msg} (key {key})")
                continue
        out.append(_describe(err, where, key))
    return ConfigError("; ".join(out))


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The TOML file as a dict; a missing file or a syntax error is a :class:`ConfigError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"config file {str(p)!r} not found"
        raise ConfigError(msg) from None
    except (OSError, UnicodeDecodeError) as e:
        msg = f"config file {str(p)!r} unreadable: {e}"
        raise ConfigError(msg) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = f"{p}: invalid TOML: {e}"
        raise ConfigError(msg) from None


def read_env(env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """``NEWSFLOW_*`` variables as a nested dict (via pydantic-settings), and key -> variable.

    A ``NEWSFLOW_`` variable that is neither a key of the tree nor in :data:`RESERVED_ENV` is a
    :class:`ConfigError`: a typo never silently does nothing."""
    env = dict(os.environ if env is None else env)
    known = {_env_name(p): p for p in ALL_PATHS}
    names: dict[str, str] = {}
    for var in sorted(env):
        up = var.upper()
        if not up.startswith(ENV_PREFIX) or up in RESERVED_ENV:
            continue
        path = known.get(up)
        if path is None:
            # a key inside a table (NEWSFLOW_SCORING__TIER_SCORES__T1) belongs to that table
            path = next((p for n, p in known.items() if up.startswith(n + ENV_DELIMITER)
                         and isinstance(_field_default(p), dict)), None)
        if path is None:
            gone = next((k for k in REMOVED if _env_name(k) == up), None)
            if gone is not None:
                msg = f"unknown environment variable {var}: key {gone!r} removed ({REMOVED[gone]})"
                raise ConfigError(msg)
            guess = _suggest(up, sorted(known))
            msg = f"unknown environment variable {var}{guess} (keys are NEWSFLOW_<SECTION>__<KEY>, e.g. NEWSFLOW_DEDUP__WINDOW_HOURS)"
            raise ConfigError(msg)
        names[path] = var
        default = _field_default(path) if path.count(".") else None
        if isinstance(default, list | tuple | dict | frozenset) and path != "kafka.brokers":
            try:
                orjson.loads(env[var])
            except orjson.JSONDecodeError:
                example = "{\"T1\": 95}" if isinstance(default, dict) else "[1, 2]"
                msg = f"{var}={env[var]!r}: not JSON (lists and tables are JSON, e.g. {example})"
                raise ConfigError(msg) from None
    src = EnvSettingsSource(
        Settings,  # type: ignore[arg-type]  # pydantic-settings reads model_fields only
        env_prefix=ENV_PREFIX, env_nested_delimiter=ENV_DELIMITER, case_sensitive=False,
    )
    src.env_vars = {k.lower(): v for k, v in env.items() if k.upper().startswith(ENV_PREFIX)
                    and k.upper() not in RESERVED_ENV}
    try:
        data = src()
    except Exception as e:  # pydantic-settings' SettingsError: a value that is not valid JSON
        cause = e.__cause__ or e
        msg = f"environment: {e}: {cause}" if cause is not e else f"environment: {e}"
        raise ConfigError(msg) from None
    return data, names


def _field_default(path: str) -> Any:
    model: Any = Settings()
    for part in path.split("."):
        model = getattr(model, part)
    return model


def _deep_merge(a: dict[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else v
    return out


def load_settings(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Defaults <- the TOML file <- ``NEWSFLOW_*`` environment variables; strict (see module doc).

    ``path=None`` uses ``NEWSFLOW_CONFIG`` if set. Raises :class:`ConfigError`."""
    return load_with_sources(path, env)[0]


def load_with_sources(path: str | Path | None = None, env: Mapping[str, str] | None = None
                      ) -> tuple[Settings, dict[str, str]]:
    """The settings and, for every leaf key, where its value came from: ``default``,
    ``file <path>`` or ``env NEWSFLOW_...``."""
    env_map = os.environ if env is None else env
    if path is None and env_map.get("NEWSFLOW_CONFIG"):
        path = env_map["NEWSFLOW_CONFIG"]
    file_data: dict[str, Any] = {}
    if path is not None:
        file_data = read_config_file(path)
        try:  # the file's types are exact: strict validation (TOML has ints, floats, strings)
            Settings.model_validate_json(orjson.dumps(file_data), strict=True)
        except ValidationError as e:
            raise _errors(e, f"{path}: ") from None
    env_data, env_names = read_env(env_map)
    if env_data:
        try:  # variables are strings: lax validation, errors name the variable
            Settings.model_validate(env_data)
        except ValidationError as e:
            raise _errors(e, "", env_names) from None
    try:
        settings = Settings.model_validate(_deep_merge(file_data, env_data))
    except ValidationError as e:  # only cross-key checks can fail here
        raise _errors(e, f"{path}: " if path else "", env_names) from None
    sources = {}
    file_leaves = set(_leaves(file_data))
    for key in leaf_paths(settings):
        if any(key == n or key.startswith(n + ".") for n in env_names):
            sources[key] = f"env {env_names.get(key) or next(v for n, v in env_names.items() if key.startswith(n + '.'))}"
        elif key in file_leaves or any(x.startswith(key + ".") for x in file_leaves) or _inside(key, file_leaves):
            sources[key] = f"file {path}"
        else:
            sources[key] = "default"
    return settings, sources


def _inside(key: str, leaves: set[str]) -> bool:
    return any(key.startswith(x + ".") for x in leaves)


def _leaves(d: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for k, v in d.items():
        p = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            yield from _leaves(v, p + ".")
        else:
            yield p


def leaf_paths(model: BaseModel, prefix: str = "") -> Iterator[str]:
    """Leaf keys, a table's own keys before its sub-tables (the order TOML needs)."""
    names = list(type(model).model_fields)
    for name in names:
        if not isinstance(getattr(model, name), BaseModel):
            yield f"{prefix}{name}"
    for name in names:
        v = getattr(model, name)
        if isinstance(v, BaseModel):
            yield from leaf_paths(v, f"{prefix}{name}.")


def show(settings: Settings, sources: Mapping[str, str]) -> str:
    """The effective configuration as TOML, each value with its source as a comment."""
    lines: list[str] = []
    section = None
    for key in leaf_paths(settings):
        table, _, leaf = key.rpartition(".")
        if table != section:
            lines.append(("" if section is None else "\n") + f"[{table}]")
            section = table
        v: Any = settings
        for part in key.split("."):
            v = getattr(v, part)
        src = sources.get(key, "default")
        lines.append(f"# {leaf} is unset  # {src}" if v is None else f"{leaf} = {_toml_value(v)}  # {src}")
    return "\n".join(lines) + "\n"


def _toml_value(v: Any) -> str:
    if isinstance(v, BaseModel):  # a table of sections (profiles.profile.NAME)
        v = v.model_dump()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return orjson.dumps(v).decode()
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{orjson.dumps(str(k)).decode()} = {_toml_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    if isinstance(v, list | tuple | frozenset | set):
        items = sorted(v) if isinstance(v, frozenset | set) else list(v)
        return "[" + ", ".join(_toml_value(x) for x in items) + "]"
    return orjson.dumps(str(v)).decode()
