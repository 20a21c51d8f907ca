"""Collections, their documents and ingestion jobs — each reachable by its owner only.

A collection made through the API belongs to the user who made it; another user's
collection answers 404 as if it did not exist. Names are unique on the server: a name taken
by anyone answers 409. Collections made with the CLI have no owner and stay out of the API's
reach until ``sleuth users assign NAME COLLECTION`` gives them to a user.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Message

from sleuth.api.auth import CurrentUser, State
from sleuth.api.jobs import IngestJob
from sleuth.api.schemas import (
    COLLECTION_NAME,
    CollectionCreate,
    CollectionOut,
    DocumentOut,
    JobOut,
    OutlineItem,
    Problem,
    SearchHitOut,
    SectionOut,
)
from sleuth.api.state import ApiState
from sleuth.api.uploads import SNIFF_BYTES, UploadRejected, check_type, safe_file_name
from sleuth.config import Settings
from sleuth.errors import SleuthError
from sleuth.retrieval.search import SearchMode, join_parts
from sleuth.store.catalog import UserInfo
from sleuth.types import MAX_QUESTION_CHARS

CollectionName = Annotated[
    str, PathParam(pattern=f"^{COLLECTION_NAME}$", description="A collection of the caller")
]
_AUTH: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "Missing or invalid API key"},
    403: {"model": Problem, "description": "The API key was revoked"},
    429: {
        "model": Problem,
        "description": "The user's request rate (or runs at once) is spent; see Retry-After",
    },
}
_404: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "No such collection (or document, job) of the caller"}
}
_409_BUSY: dict[int | str, dict[str, Any]] = {
    409: {"model": Problem, "description": "An ingestion job of the collection is pending"}
}


def _busy(state: ApiState, name: str) -> None:
    job = state.jobs.pending(name)
    if job is not None:
        raise HTTPException(
            409,
            f"ingestion job {job.job_id} of collection '{name}' is {job.state}; wait until it "
            f"has finished ({job.status_url})",
        )


def _create(state: ApiState, user: UserInfo, name: str) -> CollectionOut:
    catalog = state.sleuth.catalog
    embedder = state.sleuth.kb.embedder  # loaded (once) before the lock is taken
    backend = state.sleuth.settings.index_backend
    with state.jobs.lock:
        if catalog.get_collection(name) is not None:
            raise HTTPException(
                409, f"a collection named '{name}' already exists; choose another name"
            )
        catalog.ensure_collection(name, embedder.name, embedder.dim, backend)
        catalog.set_collection_owner(name, user.id)
        info = catalog.get_collection(name)
    assert info is not None
    return CollectionOut.of(info)


def _delete(state: ApiState, user: UserInfo, name: str) -> None:
    with state.jobs.lock:
        state.collection_of(user, name)
        _busy(state, name)
        running = [h for h in state.runs.active() if h.request.collection == name]
        if running:
            raise HTTPException(
                409, f"{len(running)} runs on collection '{name}' are not finished; retry later"
            )
        state.sleuth.drop_collection(name)
        state.jobs.forget_collection(name)


def _delete_document(state: ApiState, user: UserInfo, name: str, doc_id: str) -> None:
    with state.jobs.lock:
        state.collection_of(user, name)
        _busy(state, name)
        doc = state.sleuth.catalog.get_document(name, doc_id)
        if doc is None:
            raise HTTPException(404, f"document '{doc_id}' not found in collection '{name}'")
        state.sleuth.pipeline.delete(name, doc_id)
        uploaded = Path(doc.path)
        if uploaded.parent == state.jobs.uploads / name:
            uploaded.unlink(missing_ok=True)


def _submit(
    state: ApiState, user: UserInfo, name: str, job_id: str, staged: dict[str, Path]
) -> IngestJob:
    with state.jobs.lock:
        state.collection_of(user, name)  # not deleted while the files were written
        owned = state.sleuth.catalog.list_collections(owner=user.id)
        state.limits.check_upload(
            [state.jobs.uploads / c.name for c in owned],
            sum(path.stat().st_size for path in staged.values()),
            waiting=state.jobs.staged_bytes(user.id),
        )
        return state.jobs.submit(job_id, user.id, name, staged)


def _stage(files: list[tuple[str, UploadFile]], folder: Path) -> dict[str, Path]:
    """Write the uploads to ``folder`` (blocking IO: run in a worker thread)."""
    staged: dict[str, Path] = {}
    for name, upload in files:
        path = folder / name
        upload.file.seek(0)
        with path.open("wb") as out:
            shutil.copyfileobj(upload.file, out, 1024 * 1024)
        staged[name] = path
    return staged


def _check_uploads(form_files: list[Any], max_files: int) -> list[tuple[str, UploadFile]]:
    if not form_files:
        raise UploadRejected(422, "files: at least one file is required (multipart field 'files')")
    if len(form_files) > max_files:
        raise UploadRejected(
            422, f"files: {len(form_files)} files, at most {max_files} per request"
        )
    checked: list[tuple[str, UploadFile]] = []
    seen: set[str] = set()
    for i, item in enumerate(form_files):
        label = f"files[{i}]"
        if not isinstance(item, UploadFile):
            raise UploadRejected(422, f"{label}: expected a file, got a text field")
        name = safe_file_name(item.filename, label)
        if name.lower() in seen:
            raise UploadRejected(422, f"{label} ({name!r}): the same file name is sent twice")
        seen.add(name.lower())
        item.file.seek(0)
        head = item.file.read(SNIFF_BYTES)
        check_type(name, head, label)
        checked.append((name, item))
    return checked


UNLIMITED = 1 << 62
"""The framework's own body limit on the upload route: off (the route counts itself)."""


class _TooLarge(Exception):
    pass


async def _read_form(request: Request, limit: int, max_files: int) -> FormData:
    """The multipart form of an upload, read with a limit of ``limit`` body bytes.

    Raises:
        HTTPException: 413 (a declared or actual body over the limit) or 400 (a form that
            cannot be parsed, or too many parts).
    """
    too_large = HTTPException(
        413, f"the upload is larger than SLEUTH_UPLOAD_MAX_BYTES={limit} bytes"
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    received = 0

    async def receive() -> Message:
        nonlocal received
        message = await request.receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                raise _TooLarge
        return message

    try:
        return await Request(request.scope, receive).form(
            max_files=max_files + 1, max_fields=max_files + 10
        )
    except _TooLarge as exc:
        raise too_large from exc
    except StarletteHTTPException as exc:
        raise HTTPException(exc.status_code, f"files: {exc.detail}") from exc


OUTLINE_AROUND = 12
"""Outline entries shown on each side of a section."""


def _section(state: ApiState, user: UserInfo, name: str, source_id: str) -> SectionOut:
    state.collection_of(user, name)
    kb = state.sleuth.kb
    chunks = kb.section(name, source_id)
    if not chunks:
        raise HTTPException(404, f"section '{source_id}' not found in collection '{name}'")
    doc_id = chunks[0].doc_id
    previous, nxt = kb.catalog.neighbours(name, source_id)
    entries = kb.catalog.outline(name, doc_id)
    at = next((i for i, e in enumerate(entries) if e.source_id == source_id), 0)
    lo, hi = max(0, at - OUTLINE_AROUND), min(len(entries), at + OUTLINE_AROUND + 1)
    return SectionOut(
        source_id=source_id,
        doc_id=doc_id,
        title=chunks[0].heading,
        text=join_parts(chunks),
        previous=previous,
        next=nxt,
        outline_total=len(entries),
        outline_start=lo,
        outline=[
            OutlineItem(source_id=e.source_id, title=" > ".join(e.title_path[1:] or e.title_path))
            for e in entries[lo:hi]
        ],
    )


def collections_router(settings: Settings) -> APIRouter:
    """The collection, document and job endpoints (upload limits from ``settings``)."""
    router = APIRouter(prefix="/collections", tags=["collections"])
    max_body = settings.upload_max_bytes
    max_files = settings.upload_max_files

    @router.post(
        "",
        summary="Create a collection",
        status_code=201,
        response_model=CollectionOut,
        responses={
            **_AUTH,
            409: {"model": Problem, "description": "The name is taken"},
            422: {"model": Problem, "description": "Invalid name"},
        },
    )
    async def create_collection(
        body: CollectionCreate, user: CurrentUser, state: State
    ) -> CollectionOut:
        """A new, empty collection owned by the caller, embedded with the server's model."""
        return await run_in_threadpool(_create, state, user, body.name)

    @router.get(
        "",
        summary="List the caller's collections",
        response_model=list[CollectionOut],
        responses={**_AUTH},
    )
    def list_collections(user: CurrentUser, state: State) -> list[CollectionOut]:
        """The caller's collections, by name, with their sizes."""
        return [CollectionOut.of(c) for c in state.sleuth.catalog.list_collections(owner=user.id)]

    @router.get(
        "/{name}",
        summary="Read a collection",
        response_model=CollectionOut,
        responses={**_AUTH, **_404},
    )
    def get_collection(name: CollectionName, user: CurrentUser, state: State) -> CollectionOut:
        return CollectionOut.of(state.collection_of(user, name))

    @router.get(
        "/{name}/sections/{source_id}",
        summary="Read a section and its place in the outline",
        response_model=SectionOut,
        responses={**_AUTH, **_404},
    )
    def get_section(
        name: CollectionName, source_id: str, user: CurrentUser, state: State
    ) -> SectionOut:
        """A section's whole text (e.g. a cited one) with the sections around it in its
        document's outline."""
        return _section(state, user, name, source_id)

    @router.get(
        "/{name}/search",
        summary="Search a collection (retrieval only, no agent)",
        response_model=list[SearchHitOut],
        responses={**_AUTH, **_404, 422: {"model": Problem, "description": "Invalid query"}},
    )
    def search_collection(
        name: CollectionName,
        user: CurrentUser,
        state: State,
        q: Annotated[
            str, Query(min_length=1, max_length=MAX_QUESTION_CHARS, description="The query")
        ],
        k: Annotated[int, Query(ge=1, le=100, description="Rows wanted")] = 5,
        mode: Annotated[SearchMode, Query(description="hybrid, bm25 or dense")] = "hybrid",
        chunks: Annotated[
            bool, Query(description="Rank raw chunks, not one row per section (its best chunk)")
        ] = False,
    ) -> list[SearchHitOut]:
        """The collection's best sections for ``q`` by hybrid search (BM25 and dense fused
        with RRF), or by one of the two: what ``sleuth search`` prints."""
        if not q.strip():
            raise HTTPException(422, "q: the query is blank")
        state.collection_of(user, name)
        kb = state.sleuth.kb
        find = kb.search if chunks else kb.search_sections
        try:
            hits = find(name, q, k=k, mode=mode)
        except SleuthError as exc:
            raise HTTPException(422, str(exc)) from exc
        return [
            SearchHitOut(
                rank=h.rank,
                source_id=h.chunk.source_id,
                chunk_id=h.chunk.chunk_id,
                doc_id=h.chunk.doc_id,
                title=" > ".join(h.chunk.title_path),
                score=h.score,
                retriever=h.retriever,
                text=h.chunk.text,
            )
            for h in hits
        ]

    @router.delete(
        "/{name}",
        summary="Delete a collection",
        status_code=204,
        responses={**_AUTH, **_404, **_409_BUSY},
    )
    def delete_collection(name: CollectionName, user: CurrentUser, state: State) -> Response:
        """Delete the collection with its index data, documents and uploaded files (its runs
        are kept)."""
        _delete(state, user, name)
        return Response(status_code=204)

    @router.get(
        "/{name}/documents",
        summary="List a collection's documents",
        response_model=list[DocumentOut],
        responses={**_AUTH, **_404},
    )
    def list_documents(name: CollectionName, user: CurrentUser, state: State) -> list[DocumentOut]:
        """Every document record (indexed, failed or skipped), by doc_id."""
        state.collection_of(user, name)
        return [DocumentOut.of(d) for d in state.sleuth.catalog.list_documents(name)]

    @router.delete(
        "/{name}/documents/{doc_id}",
        summary="Delete a document",
        status_code=204,
        responses={**_AUTH, **_404, **_409_BUSY},
    )
    def delete_document(
        name: CollectionName, doc_id: str, user: CurrentUser, state: State
    ) -> Response:
        """Remove the document from the index and the catalog (and its uploaded file)."""
        _delete_document(state, user, name, doc_id)
        return Response(status_code=204)

    @router.post(
        "/{name}/documents",
        summary="Upload documents (ingested in the background)",
        description="Upload files (multipart field `files`, repeated) into the collection; "
        "answers 202 with an ingestion job at once (`Location`: the job; poll it for "
        f"progress). At most {max_files} files and {max_body} bytes per request "
        "(SLEUTH_UPLOAD_MAX_FILES, SLEUTH_UPLOAD_MAX_BYTES); types: .txt .md .html .pdf "
        ".docx .json .jsonl. A file keeps its name: uploading a name again replaces the "
        "document ingested from it.",
        status_code=202,
        response_model=JobOut,
        max_body_size=UNLIMITED,  # counted by _read_form, which answers a JSON 413
        responses={
            **_AUTH,
            **_404,
            413: {"model": Problem, "description": "The request body is too large"},
            415: {"model": Problem, "description": "A file of an unsupported type"},
            422: {"model": Problem, "description": "No file, too many, or a bad file name"},
        },
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "required": ["files"],
                            "properties": {
                                "files": {
                                    "type": "array",
                                    "items": {"type": "string", "format": "binary"},
                                    "description": f"1 to {max_files} files: "
                                    ".txt .md .html .pdf .docx .json .jsonl",
                                }
                            },
                        }
                    }
                },
            }
        },
    )
    async def upload_documents(
        name: CollectionName, request: Request, user: CurrentUser, state: State
    ) -> JSONResponse:
        await run_in_threadpool(state.collection_of, user, name)
        form = await _read_form(request, max_body, max_files)
        try:
            try:
                files = await run_in_threadpool(_check_uploads, form.getlist("files"), max_files)
            except UploadRejected as exc:
                raise HTTPException(exc.status, exc.message) from exc
            job_id, folder = state.jobs.staging_dir()
            try:
                staged = await run_in_threadpool(_stage, files, folder)
                job = await run_in_threadpool(_submit, state, user, name, job_id, staged)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
        finally:
            await form.close()
        return JSONResponse(
            job.out().model_dump(mode="json"),
            status_code=202,
            headers={"Location": job.status_url},
        )

    @router.get(
        "/{name}/jobs",
        summary="List a collection's ingestion jobs",
        response_model=list[JobOut],
        responses={**_AUTH, **_404},
    )
    def list_jobs(name: CollectionName, user: CurrentUser, state: State) -> list[JobOut]:
        """The collection's jobs, newest first (kept in the catalog across restarts)."""
        state.collection_of(user, name)
        return [j.out() for j in state.jobs.of_collection(name)]

    @router.get(
        "/{name}/jobs/{job_id}",
        summary="Read an ingestion job",
        response_model=JobOut,
        responses={**_AUTH, **_404},
    )
    def get_job(name: CollectionName, job_id: str, user: CurrentUser, state: State) -> JobOut:
        """The job's state and progress; once finished, one outcome per file."""
        state.collection_of(user, name)
        job = state.jobs.get(name, job_id)
        if job is None or job.user_id != user.id:
            raise HTTPException(404, f"job '{job_id}' not found in collection '{name}'")
        return job.out()

    return router
