"""Settings: file, environment and flags, with errors that name the setting and its source."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.config.settings import SettingsError, load_settings


def test_precedence_flag_over_env_over_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "etc" / "agentd.toml"
    config.parent.mkdir()
    config.write_text('stop_timeout = 3\nlog_format = "console"\nstate_dir = "run"\n')
    monkeypatch.delenv("AGENTD_STOP_TIMEOUT", raising=False)
    settings = load_settings(config)
    assert settings.stop_timeout == 3 and settings.log_format == "console"
    monkeypatch.setenv("AGENTD_STOP_TIMEOUT", "7")
    assert load_settings(config).stop_timeout == 7
    assert load_settings(config, stop_timeout=9).stop_timeout == 9
    root = load_settings(config, project_root=tmp_path)
    assert root.state_path == tmp_path / "run"
    assert root.socket_path == tmp_path / "run" / "agentd.sock"


def test_relative_root_in_file_is_relative_to_the_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "etc" / "agentd.toml"
    config.parent.mkdir()
    config.write_text('project_root = "."\n')
    monkeypatch.chdir("/")
    assert load_settings(config).project_root == tmp_path.resolve()


def test_bad_env_value_names_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTD_STOP_TIMEOUT", "soon")
    with pytest.raises(SettingsError) as info:
        load_settings()
    message = str(info.value)
    assert "stop_timeout" in message and "AGENTD_STOP_TIMEOUT (environment)" in message
    assert "\n" not in message


def test_bad_file_value_and_unknown_key_name_the_file(tmp_path: Path) -> None:
    config = tmp_path / "a.toml"
    config.write_text('log_format = "xml"\n')
    with pytest.raises(SettingsError, match=r"'log_format' from .*a.toml \(config file\).*'json' or 'console'"):
        load_settings(config)
    config.write_text("stop_timout = 3\n")
    with pytest.raises(SettingsError, match=r"unknown setting 'stop_timout'.*a.toml.*known settings: .*stop_timeout"):
        load_settings(config)
    config.write_text("stop_timeout = \n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings(config)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="not found"):
        load_settings(tmp_path / "nope.toml")
