"""The one settings reader (collector/settings.py): variables by their fields' aliases, options over them."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaltrace.collector.errors import InputError
from evaltrace.collector.settings import Environment, RaySettings
from evaltrace.evaluators.scoring.judge.settings import JudgeSettings


def test_a_blank_variable_counts_as_unset_and_values_are_stripped() -> None:
    settings = Environment.from_env({"EVALTRACE_STORE": "   ", "EVALTRACE_CACHE_DIR": " /tmp/c \n"})
    assert settings.store is None
    assert settings.cache_dir == Path("/tmp/c")


def test_an_option_wins_over_its_variable_and_none_is_not_given() -> None:
    env = {"EVALTRACE_STORE": "from-env", "EVALTRACE_CACHE_DIR": "/tmp/c"}
    settings = Environment.from_env(env, store=Path("from-option"), cache_dir=None)
    assert (settings.store, settings.cache_dir) == (Path("from-option"), Path("/tmp/c"))
    # An option's good value also hides a bad variable it overrides: the variable is not used.
    judge = JudgeSettings.from_env({"EVALTRACE_JUDGE_TIMEOUT": "soon"}, timeout=5)
    assert judge.timeout == 5


def test_a_bad_variable_is_one_error_naming_it() -> None:
    with pytest.raises(InputError) as raised:
        JudgeSettings.from_env({"EVALTRACE_JUDGE_CONCURRENCY": "0"})
    assert str(raised.value) == "judge setting EVALTRACE_JUDGE_CONCURRENCY: Input should be greater than or equal to 1"
    with pytest.raises(InputError) as raised:
        RaySettings.from_env({"EVALTRACE_RAY_JUDGE_ACTORS": "none"})
    assert str(raised.value) == "EVALTRACE_RAY_JUDGE_ACTORS='none': give the number of judge actors, at least 1"
    with pytest.raises(InputError) as raised:
        RaySettings.from_env({"EVALTRACE_RAY_MAX_RESTARTS": "-1"})
    assert str(raised.value).startswith("EVALTRACE_RAY_MAX_RESTARTS='-1': give how many times")


def test_a_bad_ray_variable_leaves_the_cache_and_store_settings_alone() -> None:
    # Ray's variables are a model of their own: only a Ray run reads (and fails on) them.
    env = {"EVALTRACE_RAY_JUDGE_ACTORS": "none", "EVALTRACE_RAY_MAX_RESTARTS": "x", "EVALTRACE_STORE": "s"}
    assert Environment.from_env(env).store == Path("s")
    assert RaySettings.from_env({"EVALTRACE_RAY_MAX_RESTARTS": "0"}).max_restarts == 0
    assert RaySettings.from_env({}).max_restarts == 3


def test_a_bad_option_names_the_option_or_the_keyword() -> None:
    with pytest.raises(InputError, match="^judge setting --judge-timeout: "):
        JudgeSettings.from_env({}, timeout=-1)
    with pytest.raises(InputError, match="^judge setting samples=: "):
        JudgeSettings.from_env({}, samples=0)
    with pytest.raises(TypeError, match="unknown setting 'stor'; valid: cache_dir, store"):
        Environment.from_env({}, stor=Path("x"))


def test_the_openai_fallback_comes_after_the_evaltrace_variable() -> None:
    both = {"EVALTRACE_JUDGE_BASE_URL": "http://127.0.0.1:1/v1", "OPENAI_BASE_URL": "http://127.0.0.1:2/v1"}
    assert JudgeSettings.from_env(both).base_url == "http://127.0.0.1:1/v1"
    assert JudgeSettings.from_env({"OPENAI_BASE_URL": "http://127.0.0.1:2/v1"}).base_url == "http://127.0.0.1:2/v1"


def test_a_key_stays_out_of_reprs_and_errors() -> None:
    env = {"EVALTRACE_JUDGE_API_KEY": "sk-settings-secret", "EVALTRACE_JUDGE_TIMEOUT": "soon"}
    with pytest.raises(InputError) as raised:
        JudgeSettings.from_env(env)
    assert "sk-settings-secret" not in str(raised.value)
    settings = JudgeSettings.from_env({"EVALTRACE_JUDGE_API_KEY": "sk-settings-secret"})
    assert "sk-settings-secret" not in repr(settings) + str(settings) + settings.model_dump_json()


def test_only_from_env_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings handed over (to Ray's judge actors) are validated as they are: no key joins them there.
    monkeypatch.setenv("EVALTRACE_JUDGE_API_KEY", "sk-receiver")
    monkeypatch.setenv("EVALTRACE_JUDGE_MODEL", "from-process")
    assert JudgeSettings.model_validate({"model": "shipped"}).api_key is None
    assert JudgeSettings().model is None
    read = JudgeSettings.from_env()
    assert read.model == "from-process"
    assert read.api_key is not None and read.api_key.get_secret_value() == "sk-receiver"


def test_only_the_declared_variables_are_read_not_a_field_named_bare() -> None:
    # `model`, `timeout`, `cache_dir` are common names in a shell's environment; only EVALTRACE_* configure.
    settings = JudgeSettings.from_env({"model": "stray", "timeout": "bad", "EVALTRACE_JUDGE_SAMPLES": "3"})
    assert (settings.model, settings.timeout, settings.samples) == (None, 60.0, 3)
    assert Environment.from_env({"cache_dir": "/stray", "store": "/stray"}) == Environment()
