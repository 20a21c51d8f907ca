"""Per-user limits of the API (rate, runs at once, upload quota), key rotation, JSON 413."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from sleuth.api.keys import authenticate, rotate_key
from sleuth.cli import app as cli_app
from tests.api_helpers import SlowReasoner, make_api

MURDER = "What is the punishment for murder?"


def test_a_json_body_over_1_mib_is_a_json_413(tmp_path: Path) -> None:
    env = make_api(tmp_path)
    big = b'{"query": "' + b"x" * (2 << 20) + b'", "collection": "test"}'
    with TestClient(env.app) as client:
        r = client.post(
            "/agent/search",
            content=big,
            headers={**env.auth(), "Content-Type": "application/json"},
        )
    assert r.status_code == 413
    assert r.headers["content-type"] == "application/json"
    assert "larger than 1048576 bytes (1 MiB)" in r.json()["detail"]


def test_a_user_over_the_rate_gets_429_with_retry_after_and_others_do_not(tmp_path: Path) -> None:
    env = make_api(tmp_path, api_user_rate="3/minute")
    with TestClient(env.app) as client:
        codes = [client.get("/collections", headers=env.auth()).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        r = client.get("/collections", headers=env.auth())
        assert r.status_code == 429
        assert 1 <= int(r.headers["retry-after"]) <= 60
        assert "at most 3/minute requests per user (SLEUTH_API_USER_RATE)" in r.json()["detail"]
        assert client.get("/collections", headers=env.auth("bob")).status_code == 200
        assert client.get("/health").status_code == 200  # no key, no rate


def test_runs_at_once_per_user_are_capped(tmp_path: Path) -> None:
    env = make_api(tmp_path, reasoner=SlowReasoner(0.5), api_user_max_runs=1)
    body = {"query": MURDER, "collection": "test", "stream": True, "use_memory": False}
    with TestClient(env.app) as client:
        first = client.post("/agent/search", json=body, headers=env.auth())
        assert first.status_code == 202
        second = client.post("/agent/search", json=body, headers=env.auth())
        assert second.status_code == 429
        assert "SLEUTH_API_USER_MAX_RUNS=1" in second.json()["detail"]
        assert second.headers["retry-after"] == "5"


def test_an_upload_past_the_users_quota_is_413_and_nothing_is_kept(tmp_path: Path) -> None:
    env = make_api(tmp_path, upload_quota_bytes=100)
    with TestClient(env.app) as client:
        client.post("/collections", json={"name": "notes"}, headers=env.auth())
        files = [("files", ("big.md", b"# Big\n\n" + b"word " * 40))]
        r = client.post("/collections/notes/documents", files=files, headers=env.auth())
        assert r.status_code == 413
        assert "quota of 100 bytes (SLEUTH_UPLOAD_QUOTA_BYTES)" in r.json()["detail"]
        assert client.get("/collections/notes/jobs", headers=env.auth()).json() == []
    staging = env.sleuth.settings.data_dir / "uploads" / ".staging"
    assert not staging.exists() or not any(staging.iterdir())


def test_uploads_still_waiting_to_be_ingested_count_against_the_quota(tmp_path: Path) -> None:
    """Files of a queued job sit in its staging folder, not yet in the collection's: they
    count too, so that uploads queued behind a long job cannot pass the quota."""
    env = make_api(tmp_path, upload_quota_bytes=300)
    staged = env.sleuth.settings.data_dir / "uploads" / ".staging" / "waiting"
    staged.mkdir(parents=True)
    (staged / "queued.md").write_bytes(b"x" * 250)
    env.sleuth.catalog.save_job(
        {
            "job_id": "waiting",
            "collection": "test",
            "user_id": env.user_ids["alice"],
            "state": "queued",
            "staged": {"queued.md": str(staged / "queued.md")},
            "worker": "elsewhere:1:live",  # another host's process, alive (fresh heartbeat)
            "heartbeat_at": datetime.now(UTC),
        }
    )
    files = [("files", ("small.md", b"# Small\n\n" + b"word " * 20))]  # ~110 bytes
    with TestClient(env.app) as client:
        alice = client.post("/collections/test/documents", files=files, headers=env.auth())
        assert alice.status_code == 413
        assert "your stored uploads (250 bytes)" in alice.json()["detail"]
        client.post("/collections", json={"name": "own"}, headers=env.auth("bob"))
        bob = client.post("/collections/own/documents", files=files, headers=env.auth("bob"))
        assert bob.status_code == 202  # alice's waiting upload is not bob's


def test_rotating_a_key_revokes_the_old_one_at_once(tmp_path: Path) -> None:
    env = make_api(tmp_path)
    old = env.keys["alice"]
    user, new = rotate_key(env.sleuth.catalog, "alice")
    assert new != old and new.startswith("sleuth_") and user.id == env.user_ids["alice"]
    assert authenticate(env.sleuth.catalog, old) is None
    found = authenticate(env.sleuth.catalog, new)
    assert found is not None and found.id == env.user_ids["alice"]
    with TestClient(env.app) as client:
        assert (
            client.get("/collections", headers={"Authorization": f"Bearer {old}"}).status_code
            == 401
        )
        ok = client.get("/collections", headers={"Authorization": f"Bearer {new}"})
        assert ok.status_code == 200 and ok.json()[0]["name"] == "test"


def test_cli_users_rotate_prints_the_new_key_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SLEUTH_DATA_DIR", str(tmp_path))
    runner = CliRunner()
    created = runner.invoke(cli_app, ["users", "create", "carol"])
    assert created.exit_code == 0, created.output
    rotated = runner.invoke(cli_app, ["users", "rotate", "carol"])
    assert rotated.exit_code == 0, rotated.output
    new_key = rotated.stdout.strip().splitlines()[-1]
    assert new_key.startswith("sleuth_") and new_key not in created.stdout
    missing = runner.invoke(cli_app, ["users", "rotate", "nobody"])
    assert missing.exit_code != 0 and "no user named 'nobody'" in missing.output
