"""SLEUTH_MCP_SERVERS: inline JSON or JSON/TOML files, located errors, ${VAR}, masking."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from sleuth.config import Settings, inspect_settings, validation_messages
from sleuth.errors import ConfigError
from sleuth.mcp.config import load_mcp_servers, mask_mcp_servers, parse_mcp_servers


def test_inline_json_infers_the_transport_and_keeps_defaults() -> None:
    specs = parse_mcp_servers(
        json.dumps(
            [
                {"name": "calc", "command": "python", "args": ["calc.py"], "allow": ["add"]},
                {"name": "forge", "url": "https://gw.example/servers/1/mcp", "timeout_s": 5},
                {"name": "other", "transport": "streamable-http", "url": "http://h:1/mcp"},
            ]
        )
    )
    assert [(s.name, s.transport) for s in specs] == [
        ("calc", "stdio"),
        ("forge", "http"),
        ("other", "http"),
    ]
    assert specs[0].args == ["calc.py"] and specs[0].timeout_s == 30.0
    assert specs[1].timeout_s == 5 and specs[1].allow is None
    assert specs[0].allows("add") and not specs[0].allows("delete_all")
    assert specs[1].allows("anything")


def test_allow_list_takes_shell_patterns() -> None:
    (spec,) = parse_mcp_servers('[{"name": "gh", "url": "http://h/mcp", "allow": ["get_*"]}]')
    assert spec.allows("get_issue") and not spec.allows("delete_repo")


def test_toml_and_json_files_and_the_mcp_servers_layout(tmp_path: Path) -> None:
    toml = tmp_path / "mcp.toml"
    toml.write_text(
        '[[servers]]\nname = "calc"\ncommand = "python"\nargs = ["calc.py"]\ncwd = "tools"\n'
        '\n[[servers]]\nname = "forge"\nurl = "http://127.0.0.1:4444/mcp"\n'
        'headers = { Authorization = "Bearer ${FORGE_TOKEN}" }\n'
    )
    calc, forge = parse_mcp_servers(str(toml))
    assert calc.cwd == str(tmp_path / "tools")  # relative to the file
    assert forge.headers == {"Authorization": "Bearer ${FORGE_TOKEN}"}

    claude_style = tmp_path / "servers.json"
    claude_style.write_text(
        json.dumps({"mcpServers": {"files": {"command": "npx", "args": ["-y", "fs-server"]}}})
    )
    (files,) = parse_mcp_servers(str(claude_style))
    assert (files.name, files.transport, files.args) == ("files", "stdio", ["-y", "fs-server"])
    assert parse_mcp_servers("") == [] and parse_mcp_servers(None) == []


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('[{"name": "a"}]', "servers[0]: give 'command' (a stdio server) or 'url'"),
        ('[{"name": "a", "command": "x", "timeout_s": 0}]', "servers[0].timeout_s: Input should"),
        ('[{"name": "a__b", "command": "x"}]', "servers[0].name: use 1-32 letters"),
        ('[{"name": "a", "url": "ftp://h"}]', "servers[0]: url must start with http://"),
        ('[{"name": "a", "command": "x", "url": "http://h"}]', "'url' does not apply to"),
        ('[{"name": "a", "command": "x", "bogus": 1}]', "servers[0].bogus: Extra inputs"),
        ('[{"name": "a", "command": "x"}, {"name": "a", "url": "http://h"}]', "duplicate"),
        ('[{"name": "a", "command": "x"', "not valid JSON"),
        ('{"name": "a"}', "expected a list of servers"),
        ("servers.yaml", "the path of a .json or .toml file"),
        ("/no/such/mcp.toml", "cannot read /no/such/mcp.toml"),
        ('{"mcpServers": {"x": {"command": "y", "allow": [""]}}}', "mcpServers.x.allow"),
    ],
)
def test_bad_configuration_names_the_server_and_field(value: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_mcp_servers(value)
    assert message in str(info.value)
    with pytest.raises(ConfigError) as config_error:
        load_mcp_servers(value)
    assert str(config_error.value).startswith("SLEUTH_MCP_SERVERS: ")
    assert "\n" not in str(config_error.value)


def test_invalid_setting_stops_with_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "SLEUTH_MCP_SERVERS",
        '[{"name": "a", "url": "http://h/mcp", "timeout_s": -1, "headers": {"K": "secret-1"}}]',
    )
    with pytest.raises(ValidationError) as info:
        Settings()
    message = validation_messages(info.value)["mcp_servers"]
    assert message.startswith("SLEUTH_MCP_SERVERS=")
    assert "servers[0].timeout_s: Input should be greater than 0" in message
    assert "secret-1" not in message and "\n" not in message


def test_header_and_env_values_are_masked_when_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    value = json.dumps(
        [
            {"name": "a", "url": "https://u:pw-2@h/mcp", "headers": {"Authorization": "tok-1"}},
            {"name": "b", "command": "x", "env": {"API_KEY": "key-3", "REF": "${HOME}"}},
        ]
    )
    shown = mask_mcp_servers(value)
    for secret in ("tok-1", "pw-2", "key-3"):
        assert secret not in shown
    assert "${HOME}" in shown
    monkeypatch.setenv("SLEUTH_MCP_SERVERS", value)
    values, problems = inspect_settings()
    assert not problems and "tok-1" not in values["mcp_servers"]
    assert mask_mcp_servers("/etc/sleuth/mcp.toml") == "/etc/sleuth/mcp.toml"
    assert "{" not in mask_mcp_servers('[{"broken')


def test_variables_are_expanded_when_the_server_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    (spec,) = parse_mcp_servers(
        '[{"name": "gw", "url": "http://${GW_HOST}/mcp", "headers": {"A": "Bearer ${GW_TOKEN}"}}]'
    )
    monkeypatch.setenv("GW_HOST", "127.0.0.1:4444")
    monkeypatch.setenv("GW_TOKEN", "t0k")
    expanded = spec.expanded()
    assert expanded.url == "http://127.0.0.1:4444/mcp"
    assert expanded.headers == {"A": "Bearer t0k"}
    monkeypatch.delenv("GW_TOKEN")
    with pytest.raises(ConfigError, match=r"server 'gw' headers\.A: environment variable GW_TOKEN"):
        spec.expanded()


def test_without_the_mcp_package_both_directions_name_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sleuth.errors import MissingExtraError
    from sleuth.mcp.client import MCPToolbox
    from sleuth.mcp.server import build_server

    monkeypatch.setitem(sys.modules, "mcp", None)  # as if not installed
    (spec,) = parse_mcp_servers('[{"name": "a", "command": "x"}]')  # parsing needs no SDK
    with pytest.raises(MissingExtraError) as info:
        MCPToolbox([spec])
    assert 'pip install "sleuth[mcp]"' in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(MissingExtraError, match=r"sleuth mcp needs the optional package 'mcp'"):
        build_server(None)  # type: ignore[arg-type]
