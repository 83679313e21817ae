"""The configuration tree: one strict object for the whole pipeline and the poller.

Sources, lowest to highest priority: the defaults below, one TOML file (``--config FILE`` or
``NEWSFLOW_CONFIG``), then ``NEWSFLOW_<SECTION>__<KEY>`` environment variables (``__`` between
levels, case-insensitive; lists and tables as JSON, ``kafka.brokers`` also as ``a:9092,b:9092``)::

    # newsflow.toml                         # the same as environment variables
    [dedup]
    window_hours = 48                       # NEWSFLOW_DEDUP__WINDOW_HOURS=48
    [digests]
    tz = "Europe/Berlin"                    # NEWSFLOW_DIGESTS__TZ=Europe/Berlin
    [poller.fetch]
    timeout_s = 20                          # NEWSFLOW_POLLER__FETCH__TIMEOUT_S=20

Strict: an unknown key or variable, a value of the wrong type (in the file, ``"64"`` is not a
number) or an invalid value (a range, a time zone zoneinfo does not know) stops the command
before it starts, with a :class:`ConfigError` that names the key or the variable.

The pure step packages keep their own frozen dataclasses (``StoryConfig``, ``ScoreConfig``,
``TopicConfig``, ``DigestConfig``, ``FetchConfig``, ``PollPolicy``); each section here builds
its dataclass with ``to_config()``, and its defaults are read from that dataclass, so every
default is defined once. ``Settings()`` is the defaults only: it reads neither files nor the
environment (:func:`load_settings` does).
"""

from newsflow.config.base import ConfigError, Section
from newsflow.config.loader import (
    ENV_DELIMITER,
    ENV_PREFIX,
    MOVED,
    REMOVED,
    RESERVED_ENV,
    Settings,
    leaf_paths,
    load_settings,
    load_with_sources,
    read_config_file,
    read_env,
    show,
)
from newsflow.config.services import (
    KafkaSettings,
    PollerSettings,
    ProfileSettings,
    ProfilesSettings,
    RetentionHours,
    Topics,
    TopicSubscriptionSettings,
)
from newsflow.config.steps import (
    DedupSettings,
    DigestSettings,
    FlowSettings,
    NormalizeSettings,
    ScoreWeights,
    ScoringSettings,
    StorySettings,
    TopicSettings,
)

__all__ = [
    "ENV_DELIMITER",
    "ENV_PREFIX",
    "MOVED",
    "REMOVED",
    "RESERVED_ENV",
    "ConfigError",
    "DedupSettings",
    "DigestSettings",
    "FlowSettings",
    "KafkaSettings",
    "NormalizeSettings",
    "PollerSettings",
    "ProfileSettings",
    "ProfilesSettings",
    "RetentionHours",
    "ScoreWeights",
    "ScoringSettings",
    "Section",
    "Settings",
    "StorySettings",
    "TopicSettings",
    "TopicSubscriptionSettings",
    "Topics",
    "leaf_paths",
    "load_settings",
    "load_with_sources",
    "read_config_file",
    "read_env",
    "show",
]
