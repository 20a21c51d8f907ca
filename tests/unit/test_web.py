"""The web app as the API serves it: the static build at ``/``, the section endpoint the
citation viewer reads, the shipped build being up to date with ``web/``, and the app's
TypeScript types matching the API's schema."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel, TypeAdapter

from sleuth.agents.answer import Citation, GeneratedAnswer
from sleuth.agents.events import AgentEventAdapter
from sleuth.api.schemas import (
    AgentSearchAccepted,
    AgentSearchRequest,
    AgentSearchResponse,
    CollectionOut,
    OutlineItem,
    Problem,
    RunState,
    RunSummary,
    SectionOut,
)
from sleuth.web import STATIC_DIR
from tests.api_helpers import ApiEnv, make_api

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"


@pytest.fixture
def env(tmp_path: Path) -> ApiEnv:
    return make_api(tmp_path)


@pytest.fixture
def client(env: ApiEnv) -> Iterator[TestClient]:
    with TestClient(env.app) as c:
        yield c


# ------------------------------------------------------------------------ the section endpoint


def test_a_section_comes_with_its_text_and_place_in_the_outline(
    client: TestClient, env: ApiEnv
) -> None:
    r = client.get("/collections/test/sections/BNS_S103", headers=env.auth())
    assert r.status_code == 200, r.text
    body = SectionOut.model_validate(r.json())
    assert body.doc_id == "BNS"
    assert body.text.startswith("(1) Whoever commits murder shall be punished")
    assert "Punishment for murder" in body.title
    assert (body.previous, body.next) == ("BNS_S101", "BNS_S303")
    assert [o.source_id for o in body.outline] == ["BNS_S100", "BNS_S101", "BNS_S103", "BNS_S303"]
    assert body.outline_total == 4 and body.outline_start == 0
    assert body.outline[2].title == "Section 103. Punishment for murder."


def test_sections_are_reachable_by_their_collections_owner_only(
    client: TestClient, env: ApiEnv
) -> None:
    assert client.get("/collections/test/sections/BNS_S103").status_code == 401
    other = client.get("/collections/test/sections/BNS_S103", headers=env.auth("bob"))
    assert other.status_code == 404 and "collection 'test' not found" in other.json()["detail"]
    missing = client.get("/collections/test/sections/BNS_S999", headers=env.auth())
    assert missing.status_code == 404 and "BNS_S999" in missing.json()["detail"]


# ------------------------------------------------------------------------ the static app


def test_the_web_app_is_served_at_the_root_with_its_assets(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assets = re.findall(r'(?:src|href)="(/assets/[^"]+)"', r.text)
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets)
    for asset in assets:
        got = client.get(asset)
        assert got.status_code == 200 and got.content, asset
    assert "http://" not in r.text and "https://" not in r.text  # nothing from elsewhere
    assert "/" not in client.get("/openapi.json").json()["paths"]


def test_the_api_docs_are_served_without_a_cdn(client: TestClient) -> None:
    # FastAPI's default /docs page loads Swagger UI from a CDN: blank on an offline machine
    r = client.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assets = re.findall(r"""(?:src|href)=["'](/docs/assets/[^"']+)["']""", r.text)
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets)
    for asset in assets:
        got = client.get(asset)
        assert got.status_code == 200 and got.content, asset
    assert "cdn." not in r.text and "https://" not in r.text.replace("https://swagger.io", "")
    assert "/openapi.json" in r.text
    assert client.get("/redoc").status_code == 404  # ReDoc has no offline bundle: not served


def _source_hash() -> str:
    """The hash web/scripts/stamp.mjs records (same files, same order, same bytes)."""
    files = [
        p.relative_to(WEB).as_posix()
        for p in (WEB / "src").rglob("*")
        if p.is_file() and ".test." not in p.name
    ]
    files += ["index.html", "vite.config.ts", "package.json", "package-lock.json"]
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0")
        digest.update((WEB / name).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def test_the_shipped_build_is_up_to_date_with_the_web_sources() -> None:
    stamp = json.loads((STATIC_DIR / "build.json").read_text())
    assert stamp["source_hash"] == _source_hash(), (
        "src/sleuth/web/static was not built from the current web/ sources: rebuild it with "
        "`npm ci --prefix web && npm --prefix web run build` and commit the result"
    )


# ------------------------------------------------------------------------ TypeScript types


def _ts_interfaces(text: str) -> dict[str, set[str]]:
    """``interface Name [extends Base] { field: …; }`` → field names (with the base's)."""
    found: dict[str, tuple[str | None, set[str]]] = {}
    pattern = r"interface (\w+)(?: extends (\w+))? \{(.*?)\n\}"
    for name, base, body in re.findall(pattern, text, re.S):
        fields = set(re.findall(r"^\s+(\w+)\??:", body, re.M))
        found[name] = (base or None, fields)

    def resolve(name: str) -> set[str]:
        base, fields = found[name]
        return fields | (resolve(base) if base else set())

    return {name: resolve(name) for name in found}


def _props(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    return schema["properties"]


TYPES_TS = WEB / "src" / "types.ts"
MODELS: dict[str, type[BaseModel]] = {
    "Citation": Citation,
    "GeneratedAnswer": GeneratedAnswer,
    "AgentSearchRequest": AgentSearchRequest,
    "AgentSearchAccepted": AgentSearchAccepted,
    "AgentSearchResponse": AgentSearchResponse,
    "RunSummary": RunSummary,
    "CollectionOut": CollectionOut,
    "OutlineItem": OutlineItem,
    "SectionOut": SectionOut,
    "Problem": Problem,
}


def test_typescript_event_types_match_the_event_schema() -> None:
    text = TYPES_TS.read_text()
    interfaces = _ts_interfaces(text)
    schema = AgentEventAdapter.json_schema(mode="serialization")
    defs = schema["$defs"]
    mapping = schema["discriminator"]["mapping"]
    ts_types = re.findall(r'"(\w+)"', re.search(r"EVENT_TYPES = \[(.*?)\]", text, re.S)[1])
    assert sorted(ts_types) == sorted(mapping), "EVENT_TYPES in types.ts != the API's events"
    for type_name, ref in mapping.items():
        model = ref.rsplit("/", 1)[-1]
        assert model in interfaces, f"types.ts has no interface {model}"
        assert interfaces[model] == set(_props({"$ref": ref}, defs)), model
        assert re.search(rf'interface {model} extends \w+ \{{\s*type: "{type_name}";', text), model
        union = re.search(r"export type AgentEvent =(.*?);", text, re.S)[1]
        assert model in union, f"{model} is missing from the AgentEvent union"


def test_typescript_response_types_match_the_api_schema() -> None:
    interfaces = _ts_interfaces(TYPES_TS.read_text())
    for name, model in MODELS.items():
        assert name in interfaces, f"types.ts has no interface {name}"
        assert interfaces[name] == set(model.model_json_schema()["properties"]), name
    states = TypeAdapter(RunState).json_schema()["enum"]
    ts_states = re.findall(
        r'"(\w+)"', re.search(r"type RunState =(.*?);", TYPES_TS.read_text(), re.S)[1]
    )
    assert ts_states == states
