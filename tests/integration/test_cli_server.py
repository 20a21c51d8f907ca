"""``sleuth ask --server``: the CLI hands its question to a real API server on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sleuth.cli import app as cli_app
from tests.api_helpers import make_api, serve

pytestmark = pytest.mark.integration

MURDER = "What is the punishment for murder?"


def test_ask_with_server_streams_the_servers_run_and_prints_its_cited_answer(
    tmp_path: Path,
) -> None:
    env = make_api(tmp_path)
    runner = CliRunner()
    with serve(env.app) as url:
        args = ["ask", MURDER, "-c", "test", "--server", url, "--no-memory", "--ascii"]
        shown = runner.invoke(cli_app, args, env={"SLEUTH_API_KEY": env.keys["alice"]})
        assert shown.exit_code == 0, shown.output
        assert "[think]" in shown.output  # the server's steps, printed as they came
        assert "S103" in shown.output  # the cited answer
        quiet = runner.invoke(
            cli_app, [*args, "--quiet"], env={"SLEUTH_API_KEY": env.keys["alice"]}
        )
        assert quiet.exit_code == 0, quiet.output
        assert quiet.output.rstrip().splitlines()[-1].startswith("citations: ")
        assert "S103" in quiet.output.rstrip().splitlines()[-1]
        runs = env.sleuth.catalog.list_runs(user_id=env.user_ids["alice"])
        assert len(runs) == 2  # both runs were made by the server, as alice


def test_ask_with_server_names_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    env = make_api(tmp_path)
    runner = CliRunner()
    with serve(env.app) as url:
        base = ["ask", MURDER, "--server", url]
        unknown = runner.invoke(
            cli_app, [*base, "-c", "laws"], env={"SLEUTH_API_KEY": env.keys["alice"]}
        )
        assert unknown.exit_code == 1
        assert "404" in unknown.output and "laws" in unknown.output
        no_key = runner.invoke(cli_app, [*base, "-c", "test"], env={"SLEUTH_API_KEY": ""})
        assert no_key.exit_code == 1 and "SLEUTH_API_KEY" in no_key.output
        bob = runner.invoke(cli_app, [*base, "-c", "test"], env={"SLEUTH_API_KEY": env.keys["bob"]})
        assert bob.exit_code == 1 and "404" in bob.output  # another user's collection
    gone = runner.invoke(cli_app, [*base, "-c", "test"], env={"SLEUTH_API_KEY": "x"})
    assert gone.exit_code == 1
    assert "cannot reach the sleuth server" in gone.output and "Traceback" not in gone.output


def test_ask_with_server_refuses_a_url_or_key_it_cannot_send_before_sending(
    tmp_path: Path,
) -> None:
    runner = CliRunner()
    base = ["ask", MURDER, "-c", "test"]
    no_scheme = runner.invoke(cli_app, [*base, "--server", "127.0.0.1:8000"])
    assert no_scheme.exit_code == 2 and "http:// or https://" in no_scheme.output
    for key in ("bad\nkey", "ключ", "two words"):
        bad = runner.invoke(
            cli_app, [*base, "--server", "http://127.0.0.1:9"], env={"SLEUTH_API_KEY": key}
        )
        assert bad.exit_code == 2 and "API key" in bad.output, key
        assert "cannot reach" not in bad.output


def test_ask_with_server_gives_up_on_a_server_that_stops_answering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that takes the connection and never answers (a frozen process) ends the
    command with one line after the read timeout, not a hang."""
    import socket
    import threading

    from sleuth.cli import remote

    monkeypatch.setattr(remote, "READ_TIMEOUT_S", 1.0)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(listener.accept()[0]), daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        frozen = CliRunner().invoke(
            cli_app, ["ask", MURDER, "-c", "test", "--server", url], env={"SLEUTH_API_KEY": "k"}
        )
    finally:
        listener.close()
        for conn in held:
            conn.close()
    assert frozen.exit_code == 1
    assert "did not answer" in frozen.output and "Traceback" not in frozen.output
