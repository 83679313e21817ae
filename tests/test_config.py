"""The configuration tree: defaults = the pure packages' dataclasses, strict errors that name the
key or variable, sources, and the configured objects reaching every step."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import orjson
import pytest

from newsflow.clustering.topics import TopicConfig
from newsflow.config import (
    ConfigError,
    KafkaSettings,
    Settings,
    StorySettings,
    leaf_paths,
    load_settings,
    load_with_sources,
    read_config_file,
    show,
)
from newsflow.connectors.http_fetch import FetchConfig
from newsflow.connectors.poller.config import PollerConfig, poller_config
from newsflow.core.timeutil import iso_to_ms
from newsflow.dedup.story_config import StoryConfig
from newsflow.digest.config import DigestConfig
from newsflow.feeds.normalize import NormalizeConfig
from newsflow.flows.steps.digest_feeder import FeederLogic
from newsflow.flows.steps.digest_trend import TrendLogic
from newsflow.flows.steps.parse import ParseLogic
from newsflow.flows.steps.stories import StoriesLogic
from newsflow.polling.state import PollPolicy
from newsflow.scoring.importance import ScoreConfig

NEWSFLOW = [sys.executable, "-m", "newsflow.cli.main"]


def cfg(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "newsflow.toml"
    p.write_text(text, encoding="utf-8")
    return p


def error_of(path: Path | None = None, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as e:
        load_settings(path, env or {})
    return str(e.value)


# ------------------------------------------------------------------ defaults
def test_defaults_are_the_pure_packages_defaults() -> None:
    s = Settings()
    assert s.stories.to_config() == StoryConfig()
    assert s.scoring.to_config() == ScoreConfig()
    assert s.topics.to_config() == TopicConfig()
    assert s.digests.to_config() == DigestConfig(time_basis="fetched")  # the flow's basis
    assert s.normalize.to_config() == NormalizeConfig()
    assert poller_config(s) == PollerConfig()
    assert poller_config(s).fetch == FetchConfig() and poller_config(s).policy == PollPolicy()
    assert (s.dedup.window_ms, s.dedup.shards, s.stories.shards, s.flow.tick_ms) == (72 * 3_600_000, 8, 8, 60_000)
    assert load_settings(None, {}) == s


def test_story_section_is_generated_from_the_story_config() -> None:
    """The ``[stories]`` keys are StoryConfig's fields (times in hours) and the shard count."""
    import dataclasses

    fields = [f.name for f in dataclasses.fields(StoryConfig)]
    keys = [k.replace("_ms_dense", "_dense_hours").replace("_ms", "_hours") for k in fields]
    assert list(StorySettings.model_fields) == [*keys, "shards"]
    story = StorySettings(window_hours=48, story_idle_dense_hours=6, max_candidates=8).to_config()
    assert story == dataclasses.replace(StoryConfig(), window_ms=48 * 3_600_000,
                                        story_idle_ms_dense=6 * 3_600_000, max_candidates=8)


def test_a_removed_story_key_is_named_in_one_line(tmp_path: Path) -> None:
    for text in ('[stories]\npreset = "seed"\n', "[stories]\nuse_entity_layer = true\n"):
        msg = error_of(cfg(tmp_path, text))
        key = text.split("\n")[1].split(" ")[0]
        assert msg.startswith(f"{tmp_path / 'newsflow.toml'}: unknown key 'stories.{key}': removed (")
        assert "one algorithm" in msg and "docs/user-guide.md" in msg and "\n" not in msg
    msg = error_of(env={"NEWSFLOW_STORIES__STORY_NAME_VETO": "false"})
    assert msg.startswith("unknown environment variable NEWSFLOW_STORIES__STORY_NAME_VETO: key "
                          "'stories.story_name_veto' removed (")


def test_settings_constructor_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEWSFLOW_DEDUP__SHARDS", "3")
    assert Settings().dedup.shards == 8
    assert load_settings().dedup.shards == 3


def test_every_key_of_a_file_and_nested_env_vars(tmp_path: Path) -> None:
    p = cfg(tmp_path, """
[dedup]
window_hours = 48
[stories]
story_threshold = 0.1
[scoring.weights]
authority = 0.3
recency = 0.15
[scoring.tier_scores]
T5 = 10.0
[digests]
tz = "Europe/Berlin"
[poller.fetch]
timeout_s = 5
retry_backoff_s = [0.5, 1.5]
[kafka]
brokers = "a:1,b:2"
[kafka.topics]
raw = "raw.test"
""")
    s, src = load_with_sources(p, {"NEWSFLOW_DEDUP__WINDOW_HOURS": "24", "NEWSFLOW_DIGESTS__ROLLING_MINUTES": "30",
                                    "NEWSFLOW_POLLER__POLICY__TRANSIENT_STATUSES": "[500, 503]"})
    assert s.dedup.window_ms == 24 * 3_600_000  # env beats file
    assert src["dedup.window_hours"] == "env NEWSFLOW_DEDUP__WINDOW_HOURS"
    assert src["digests.tz"] == f"file {p}" and src["dedup.shards"] == "default"
    assert src["stories.story_threshold"] == f"file {p}" and src["stories.window_hours"] == "default"
    story = s.stories.to_config()
    assert story.story_threshold == 0.1 and story.window_ms == StoryConfig().window_ms
    score = s.scoring.to_config()
    assert score.weights == (0.3, 0.15, 0.2, 0.2, 0.15) and score.tier_scores["T5"] == 10.0
    assert score.tier_scores["T1"] == 95.0
    sched = s.digests.schedule()
    assert sched.tz == "Europe/Berlin" and sched.type("rolling").every_minutes == 30
    pc = poller_config(s)
    assert pc.fetch.timeout_s == 5.0 and pc.fetch.retry_backoff_s == (0.5, 1.5)
    assert pc.policy.transient_statuses == frozenset({500, 503})
    assert pc.topics.raw == "raw.test" and s.kafka.brokers == ["a:1", "b:2"]
    text = show(s, src)
    assert "window_hours = 24.0  # env NEWSFLOW_DEDUP__WINDOW_HOURS" in text
    assert f'tz = "Europe/Berlin"  # file {p}' in text and "[poller.fetch]" in text
    assert Settings.model_validate(tomllib.loads(text)) == s  # the output is the same config as TOML


# ------------------------------------------------------------------ strict errors
def test_unknown_key_is_named_with_a_suggestion(tmp_path: Path) -> None:
    msg = error_of(cfg(tmp_path, "dedup_windw_ms = 5\n"))
    assert "unknown key 'dedup_windw_ms'" in msg and "dedup.window_hours" in msg
    msg = error_of(cfg(tmp_path, "[dedup]\nshard = 5\n"))
    assert "unknown key 'dedup.shard'" in msg and "'dedup.shards'" in msg


def test_the_removed_per_type_digests_switch_is_an_unknown_key(tmp_path: Path) -> None:
    # the digests are assembled per window, the only design: a file still choosing is told so
    msg = error_of(cfg(tmp_path, "[digests]\nper_window = true\n"))
    assert "unknown key 'digests.per_window'" in msg and "\n" not in msg, msg


def test_old_flat_key_says_where_it_went(tmp_path: Path) -> None:
    assert "unknown key 'dedup_shards': it is now dedup.shards" in error_of(cfg(tmp_path, "dedup_shards = 64\n"))


def test_wrong_type_in_the_file_is_not_coerced(tmp_path: Path) -> None:
    msg = error_of(cfg(tmp_path, '[dedup]\nshards = "64"\n'))
    assert "dedup.shards = '64'" in msg and "valid integer" in msg
    assert "dedup.emit_repolls" in error_of(cfg(tmp_path, '[dedup]\nemit_repolls = "yes"\n'))


def test_invalid_values_ranges_and_time_zones(tmp_path: Path) -> None:
    msg = error_of(cfg(tmp_path, '[digests]\ntz = "Mars/Olympus"\n'))
    assert "digests.tz = 'Mars/Olympus'" in msg and "unknown time zone" in msg
    assert "greater than or equal to 1" in error_of(cfg(tmp_path, "[dedup]\nshards = 0\n"))
    assert "power of two" in error_of(cfg(tmp_path, "[topics]\ndim = 48\n"))
    assert "sum to 1" in error_of(cfg(tmp_path, "[scoring.weights]\nauthority = 0.9\n"))
    assert "unknown tier" in error_of(cfg(tmp_path, "[scoring.tier_scores]\nT9 = 5.0\n"))
    assert "HOST:PORT" in error_of(cfg(tmp_path, '[kafka]\nbrokers = ["nohost"]\n'))
    assert "stories.story_threshold_dense = 0.0" in error_of(cfg(tmp_path, "[stories]\nstory_threshold_dense = 0.0\n"))
    assert "stories.max_candidates = 0" in error_of(cfg(tmp_path, "[stories]\nmax_candidates = 0\n"))


def test_unknown_and_bad_environment_variables_are_named() -> None:
    msg = error_of(env={"NEWSFLOW_DEDUP_WINDOW": "24"})
    assert "unknown environment variable NEWSFLOW_DEDUP_WINDOW" in msg and "NEWSFLOW_DEDUP__WINDOW_HOURS" in msg
    msg = error_of(env={"NEWSFLOW_DEDUP__SHARDS": "many"})
    assert msg.startswith("NEWSFLOW_DEDUP__SHARDS='many'") and "dedup.shards" in msg
    assert "NEWSFLOW_DIGESTS__TZ='Mars/Olympus'" in error_of(env={"NEWSFLOW_DIGESTS__TZ": "Mars/Olympus"})
    assert "not JSON" in error_of(env={"NEWSFLOW_POLLER__FETCH__RETRY_BACKOFF_S": "1,2"})
    # variables that are not configuration keys are left alone
    assert load_settings(None, {"NEWSFLOW_SHARED": "/x", "NEWSFLOW_INPUT": "a", "OTHER": "1"}) == Settings()


def test_file_problems_are_config_errors(tmp_path: Path) -> None:
    assert "not found" in error_of(tmp_path / "missing.toml")
    assert "invalid TOML" in error_of(cfg(tmp_path, "[dedup\n"))
    with pytest.raises(ConfigError):
        read_config_file(tmp_path)  # a directory


# ------------------------------------------------------------------ configured objects reach the steps
def test_every_step_gets_its_configured_objects() -> None:
    s = Settings.model_validate({
        "normalize": {"reading_wpm": 100}, "stories": {"story_threshold": 0.3, "shards": 2},
        "scoring": {"lam": 0.1}, "topics": {"n_clusters": 4, "dim": 32},
        "digests": {"tz": "America/New_York", "min_importance": 30.0},
    })
    assert ParseLogic(s, None, False).normalize_config.reading_wpm == 100
    stories = StoriesLogic(s, None, False)
    assert stories.assigner.config == s.stories.to_config() and stories.assigner.config.story_threshold == 0.3
    assert stories.topics.config == TopicConfig(n_clusters=4, dim=32)
    assert stories.score_config.lam == 0.1
    assert TrendLogic(s, None).config.min_importance == 30.0
    assert FeederLogic(s, None, "clock").schedule.tz == "America/New_York"


def test_demo_honours_config_file_and_env(tmp_path: Path) -> None:
    p = cfg(tmp_path, '[digests]\ntz = "America/New_York"\n')
    out = tmp_path / "out"
    env = {"PATH": "/usr/bin:/bin", "NEWSFLOW_DIGESTS__ROLLING_MINUTES": "120"}
    r = subprocess.run([*NEWSFLOW, "demo", "--config", str(p), "--out", str(out)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    digests = [orjson.loads(x) for x in (out / "digests.jsonl").read_bytes().splitlines()]
    assert {d["timezone"] for d in digests} == {"America/New_York"}
    rolling = [d for d in digests if d["digest_type"] == "rolling"]
    # 120-minute rolling windows (the default is 60)
    assert rolling and all(iso_to_ms(d["window_end"]) - iso_to_ms(d["window_start"]) == 120 * 60_000
                           for d in rolling)
    assert {orjson.loads(x)["schema"] for x in (out / "articles.jsonl").read_bytes().splitlines()} == {"articles"}


def test_entry_points_read_newsflow_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from newsflow.flows import entry

    monkeypatch.setenv("NEWSFLOW_CONFIG", str(cfg(tmp_path, '[kafka]\nbrokers = ["h:9"]\n[dedup]\nshards = 4\n')))
    s = entry._settings()
    assert s.kafka.brokers == ["h:9"] and s.dedup.shards == 4


# ------------------------------------------------------------------ CLI manners
def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NEWSFLOW, *args], capture_output=True, text=True, timeout=timeout,
                          env={"PATH": "/usr/bin:/bin", **(env or {})})


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("newsflow: error: ")
    return lines[0]


def test_version() -> None:
    from newsflow import __version__

    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"newsflow {__version__}"


def test_user_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    bad = cfg(tmp_path, '[dedup]\nshards = "64"\n')
    assert "not found" in one_line_error(run_cli("demo", "--input", str(tmp_path / "nope.jsonl")))
    assert "holds no *.jsonl" in one_line_error(run_cli("demo", "--input", str(tmp_path / "empty")))
    assert "config file" in one_line_error(run_cli("demo", "--config", str(tmp_path / "nope.toml")))
    assert "dedup.shards = '64'" in one_line_error(run_cli("run", "--config", str(bad)))
    assert "Mars/Olympus" in one_line_error(run_cli("config", "show", env={"NEWSFLOW_DIGESTS__TZ": "Mars/Olympus"}))
    assert "NEWSFLOW_DEDUP_WINDOW" in one_line_error(run_cli("demo", env={"NEWSFLOW_DEDUP_WINDOW": "5"}))
    assert "not found" in one_line_error(run_cli("normalize", str(tmp_path / "nope.xml")))
    assert "not found" in one_line_error(run_cli("digest", "render", str(tmp_path / "nope.jsonl")))


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@pytest.mark.parametrize("how", ["flag", "env"])
def test_unreachable_broker_is_one_line_within_the_timeout(how: str) -> None:
    port = closed_port()
    args = ["run", "--brokers", f"127.0.0.1:{port}"]
    env = {}
    if how == "flag":
        args += ["--broker-timeout", "2"]
    else:
        env = {"NEWSFLOW_KAFKA__TIMEOUT_S": "2"}
    t0 = time.monotonic()
    r = run_cli(*args, env=env)
    elapsed = time.monotonic() - t0
    line = one_line_error(r)
    assert f"127.0.0.1:{port} unreachable after 2 s" in line
    assert elapsed < 2 + 20  # the timeout plus interpreter start-up on a busy machine
    assert KafkaSettings().timeout_s <= 15


def test_shipped_example_config_lists_every_default() -> None:
    example = Path(__file__).resolve().parents[1] / "config" / "newsflow.toml"
    assert load_settings(example, {}) == Settings()
    # uncommented, every key is valid and is the default (user_agent depends on versions)
    lines = [ln[2:] if ln.startswith("# ") and " = " in ln and "(unset)" not in ln and "user_agent" not in ln
             else ln for ln in example.read_text(encoding="utf-8").splitlines()]
    uncommented = tomllib.loads("\n".join(lines))
    assert Settings.model_validate(uncommented, strict=False) == Settings()
    leaves = set(leaf_paths(Settings()))
    keys = {f"{t}.{k}" for t, tbl in _tables(uncommented) for k in tbl}
    keys = {next((leaf for leaf in leaves if k.startswith(leaf + ".")), k) for k in keys}  # tables as values
    unset = {"scoring.interests", "profiles.profile", "digests.n_topics", "poller.blob_dir", "poller.fetch.accept_language",
             "poller.fetch.user_agent"}  # unset, or an empty table
    assert keys | unset == leaves  # every key is in the example


def _tables(d: dict, prefix: str = "") -> list[tuple[str, dict]]:
    out = [(prefix.rstrip("."), {k: v for k, v in d.items() if not isinstance(v, dict)})]
    for k, v in d.items():
        if isinstance(v, dict):
            out += _tables(v, f"{prefix}{k}.")
    return out


# ------------------------------------------------------------------ profiles
PROFILES_TOML = """
[profiles.rates]
read = 0.3
[profiles.profile.reader]
digests = ["evening_recap"]
categories = ["science"]
[profiles.profile.reader.topics]
space = { keywords = ["nasa", "orbit"], weight = 2 }
sports = ["match", "league"]
"""


def test_profiles_are_a_section_of_the_one_tree(tmp_path: Path) -> None:
    from newsflow.profiles.config import ProfileRates, ProfileSpec, TopicSubscription

    p = cfg(tmp_path, PROFILES_TOML)
    s, src = load_with_sources(p, {"NEWSFLOW_PROFILES__RATES__SKIP": "0.25",
                                    "NEWSFLOW_PROFILES__PROFILE__READER__PUBLISHERS": '["Nature"]'})
    pc = s.profiles.to_config()
    assert pc.names == ["default", "reader"] and s.profiles.configured and not s.profiles.live_default
    assert pc.rates == ProfileRates(read=0.3, skip=0.25)
    assert pc.get("reader") == ProfileSpec(
        "reader", topics=(TopicSubscription("space", ("nasa", "orbit"), 2.0),
                          TopicSubscription("sports", ("match", "league"), 1.0)),
        categories=("science",), publishers=("Nature",), digests=("evening_recap",))
    assert src["profiles.rates.read"] == f"file {p}" and src["profiles.rates.skip"] == "env NEWSFLOW_PROFILES__RATES__SKIP"
    assert Settings.model_validate(tomllib.loads(show(s, src))) == s  # shown as TOML, the same config
    # the defaults: only the neutral default profile, nothing configured, the rates' defaults
    assert Settings().profiles.to_config().names == ["default"] and not Settings().profiles.configured
    assert Settings().profiles.to_config().rates == ProfileRates()
    assert load_settings(cfg(tmp_path, "[profiles.profile.default]\n"), {}).profiles.live_default


def test_profile_mistakes_are_named(tmp_path: Path) -> None:
    msg = error_of(cfg(tmp_path, "[profiles.profile.x]\ntopic = {}\n"))
    assert "unknown key 'profiles.profile.x.topic'" in msg, msg
    msg = error_of(cfg(tmp_path, '[profiles.profile.x]\ndigests = ["morning"]\n'))
    assert "unknown digest type(s) morning" in msg and "morning_brief" in msg, msg
    assert "profile name(s) 'a:b'" in error_of(cfg(tmp_path, '[profiles.profile."a:b"]\n'))
    assert "NEWSFLOW_PROFILES__RATES__READ" in error_of(None, {"NEWSFLOW_PROFILES__RATES__READ": "fast"})
