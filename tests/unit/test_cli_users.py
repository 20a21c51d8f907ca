"""``sleuth users …`` and ``sleuth serve``: keys printed once, stored hashed; clear errors."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sleuth.api.keys import authenticate, hash_api_key
from sleuth.cli import app
from sleuth.config import Settings
from sleuth.errors import MissingExtraError
from sleuth.store.catalog import Catalog

runner = CliRunner()


def _catalog() -> Catalog:
    return Catalog(Settings().catalog_url)


def test_users_create_prints_the_key_once_and_stores_its_hash() -> None:
    result = runner.invoke(app, ["users", "create", "alice"])
    assert result.exit_code == 0, result.output
    key = result.stdout.strip()
    assert key.startswith("sleuth_") and "\n" not in key
    assert "shown this once" in result.stderr
    catalog = _catalog()
    user = authenticate(catalog, key)
    assert user is not None and user.name == "alice"
    found = catalog.user_key_hash(user.id)
    assert found is not None and found[1] == hash_api_key(key)
    listed = runner.invoke(app, ["users", "list", "--json"])
    assert listed.exit_code == 0 and key not in listed.stdout and '"alice"' in listed.stdout
    again = runner.invoke(app, ["users", "create", "alice"])
    assert again.exit_code == 1 and again.stderr.strip() == (
        "error: a user named 'alice' already exists"
    )


@pytest.mark.parametrize("name", ["../x", "", "a b", "x" * 65])
def test_users_create_refuses_bad_names_as_usage_errors(name: str) -> None:
    result = runner.invoke(app, ["users", "create", name])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid user name")


def test_users_assign_and_revoke() -> None:
    runner.invoke(app, ["users", "create", "bob"])
    _catalog().ensure_collection("laws", "m", 8, "local")
    result = runner.invoke(app, ["users", "assign", "bob", "laws"])
    assert result.exit_code == 0, result.output
    catalog = _catalog()
    bob = catalog.get_user("bob")
    assert bob is not None and catalog.collection_owner("laws") == bob.id
    missing = runner.invoke(app, ["users", "assign", "nobody", "laws"])
    assert missing.exit_code == 1 and "no user named 'nobody'" in missing.stderr
    no_coll = runner.invoke(app, ["users", "assign", "bob", "nope"])
    assert no_coll.exit_code == 1 and "collection 'nope' does not exist" in no_coll.stderr
    revoked = runner.invoke(app, ["users", "revoke", "bob"])
    assert revoked.exit_code == 0 and _catalog().get_user("bob").disabled  # type: ignore[union-attr]
    assert runner.invoke(app, ["users", "revoke", "nobody"]).exit_code == 1


def test_serve_without_the_api_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sleuth.errors

    def missing(module: str, extra: str, purpose: str) -> object:
        raise MissingExtraError(extra, module, purpose)

    monkeypatch.setattr(sleuth.errors, "require", missing)
    result = runner.invoke(app, ["serve"])
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert "\n" not in line and 'pip install "sleuth[api]"' in line and "sleuth serve" in line


def test_serve_binds_loopback_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    seen: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app_, **kw: seen.update(kw))
    result = runner.invoke(app, ["serve"])
    assert result.exit_code == 0, result.output
    assert seen["host"] == "127.0.0.1" and seen["port"] == 8000
    assert "warning" not in result.stderr
    result = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--port", "9001"])
    assert seen["host"] == "0.0.0.0" and seen["port"] == 9001
    assert "reachable from other machines" in result.stderr
    bad = runner.invoke(app, ["serve", "--port", "70000"])
    assert bad.exit_code == 2
