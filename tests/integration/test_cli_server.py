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
