"""The ``sleuth`` command line.

Exit codes: 0 answered (or command succeeded), 1 error, 2 usage error, 3 insufficient context.
Commands parse options and hand off to the library; sleuth's own errors become a one-line
message on stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sleuth.config import Settings, inspect_settings, validation_messages
from sleuth.errors import SleuthError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INSUFFICIENT = 3
DEMO_COLLECTION = "python-reference"
DEMO_QUESTION = "How does Python resolve a free variable in a nested function?"

app = typer.Typer(
    name="sleuth",
    help="sleuth — an agentic RAG engine: it searches, reads, follows references and answers "
    "with checked citations.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
err = Console(stderr=True, highlight=False)

CollectionOpt = Annotated[
    str | None,
    typer.Option("--collection", "-c", help="Collection name (default: SLEUTH_DEFAULT_COLLECTION)"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout")]
AsciiOpt = Annotated[bool, typer.Option("--ascii", help="ASCII-only output")]


def _error_line(message: str) -> None:
    """``error: <message>`` on stderr, on one line (no markup, no wrapping)."""
    err.print(Text.assemble(("error:", "red"), " ", message), soft_wrap=True, highlight=False)


def _fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    _error_line(message)
    return typer.Exit(code)


def _settings() -> Settings:
    """The settings in force; invalid ones end the command with one line per bad field."""
    from pydantic import ValidationError

    try:
        return Settings()
    except ValidationError as exc:
        for line in validation_messages(exc).values():
            _error_line(line)
        raise typer.Exit(EXIT_ERROR) from exc


def _sleuth():  # type: ignore[no-untyped-def]
    from sleuth.app import Sleuth

    return Sleuth(_settings())


def _collection(name: str | None) -> str:
    """The collection to use (``-c`` or the default), checked before anything is opened."""
    from sleuth.errors import UserError
    from sleuth.store.catalog import validate_collection_name

    chosen = _settings().default_collection if name is None else name
    try:
        return validate_collection_name(chosen)
    except UserError as exc:
        raise _fail(str(exc), EXIT_USAGE if name is not None else EXIT_ERROR) from exc


def _non_empty(text: str, what: str) -> str:
    if not text.strip():
        raise _fail(f"the {what} is empty; give a non-empty {what}", EXIT_USAGE)
    return text


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories to ingest")],
    collection: CollectionOpt = None,
    record_path: Annotated[
        str | None, typer.Option(help="JSON: dotted path to the record list")
    ] = None,
    text_field: Annotated[str | None, typer.Option(help="JSON: record field with text")] = None,
    title_field: Annotated[str | None, typer.Option(help="JSON: record field w/ title")] = None,
    id_field: Annotated[str | None, typer.Option(help="JSON: record field used as id")] = None,
    source_id_template: Annotated[
        str | None, typer.Option(help="JSON: e.g. '{doc.name|abbr}_S{section_number}'")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Ingest files (txt, md, html, pdf, docx, json, jsonl) into a collection."""
    from sleuth.ingest.progress import RichProgress
    from sleuth.ingest.records import RecordOptions

    fields = {
        "record_path": record_path,
        "text_field": text_field,
        "title_field": title_field,
        "id_field": id_field,
        "source_id_template": source_id_template,
    }
    options = (
        RecordOptions(**{k: v for k, v in fields.items() if v is not None})
        if any(v is not None for v in fields.values())
        else None
    )
    name = _collection(collection)
    s = _sleuth()
    try:
        if as_json:
            report = s.pipeline.ingest(paths, name, options)
        else:
            with RichProgress(err) as progress:
                report = s.pipeline.ingest(paths, name, options, progress=progress)
    except SleuthError as exc:
        raise _fail(str(exc)) from exc
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        for warning in report.warnings:
            err.print(f"[yellow]warning:[/yellow] {warning}")
        for f in report.files:
            if f.status in ("failed", "duplicate"):
                err.print(f"[red]{f.status}:[/red] {f.path}: {f.message}")
        t = report.totals
        typer.echo(
            f"{name}: {t['added']} added, {t['replaced']} replaced, {t['unchanged']} unchanged, "
            f"{t['duplicate']} duplicate, {t['skipped']} skipped, {t['failed']} failed; "
            f"{report.n_embedded} chunks embedded in {report.timings.total_s:.1f} s"
        )
    s.close()
    if report.files and len(report.by_status("failed")) == len(report.files):
        raise typer.Exit(EXIT_ERROR)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="Search query")],
    collection: CollectionOpt = None,
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, max=100)] = 5,
    mode: Annotated[str, typer.Option(help="hybrid | bm25 | dense")] = "hybrid",
    as_json: JsonOpt = False,
) -> None:
    """Search a collection (no agent): ranked chunks with their source_id."""
    if mode not in ("hybrid", "bm25", "dense"):
        raise _fail(f"--mode must be hybrid, bm25 or dense, not '{mode}'", EXIT_USAGE)
    _non_empty(query, "query")
    name = _collection(collection)
    s = _sleuth()
    try:
        hits = s.kb.search(name, query, k=top_k, mode=mode)  # type: ignore[arg-type]
    except SleuthError as exc:
        s.close()
        raise _fail(str(exc)) from exc
    s.close()
    if as_json:
        typer.echo(json.dumps([h.model_dump() for h in hits], indent=2, ensure_ascii=False))
        return
    table = Table("rank", "source_id", "score", "title / text")
    for h in hits:
        snippet = " ".join(h.chunk.text.split())[:160]
        table.add_row(
            str(h.rank), h.chunk.source_id, f"{h.score:.4f}", f"{h.chunk.heading}\n{snippet}"
        )
    Console(highlight=False).print(table)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question")],
    collection: CollectionOpt = None,
    mode: Annotated[str, typer.Option(help="react (autonomous loop) | guided (typed agents)")] = (
        "react"
    ),
    max_iterations: Annotated[int | None, typer.Option(min=1, help="ReAct loop cap")] = None,
    as_json: JsonOpt = False,
    ascii_only: AsciiOpt = False,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Only the answer text and its citation ids, plain"),
    ] = False,
    no_memory: Annotated[
        bool,
        typer.Option(
            "--no-memory", help="Neither recall past runs nor remember this one (SLEUTH_MEMORY)"
        ),
    ] = False,
) -> None:
    """Ask a question: the agent's trace streams live, then the cited answer."""
    if mode not in ("react", "guided"):
        raise _fail(f"--mode must be react or guided, not '{mode}'", EXIT_USAGE)
    _non_empty(question, "question")
    from sleuth.service import MAX_QUESTION_CHARS

    if len(question) > MAX_QUESTION_CHARS:
        raise _fail(
            f"the question is too long: {len(question):,} characters, at most "
            f"{MAX_QUESTION_CHARS:,}",
            EXIT_USAGE,
        )
    name = _collection(collection)
    s = _sleuth()
    _ask(s, question, name, max_iterations, as_json, ascii_only, quiet, mode, not no_memory)


def _ask(  # type: ignore[no-untyped-def]
    s, question, collection, max_iterations, as_json, ascii_only, quiet, mode="react", memory=True
):
    from sleuth.trace import TraceRenderer

    renderer = TraceRenderer(ascii_only=ascii_only)
    sinks = [] if (as_json or quiet) else [renderer]
    try:
        response = s.agent.execute_agentic_search(
            question,
            collection,
            mode=mode,
            max_iterations=max_iterations,
            sinks=sinks,
            use_memory=memory,
        )
    except SleuthError as exc:
        raise _fail(str(exc)) from exc
    finally:
        s.close()
    if not as_json:  # MCP servers whose tools could not be offered
        for warning in (response.trace.get("mcp") or {}).get("warnings", []):
            err.print(Text.assemble(("warning:", "yellow"), " ", warning), soft_wrap=True)
    if as_json:
        typer.echo(response.model_dump_json(indent=2))
    elif quiet:
        prefix = "Insufficient context: " if response.answer.is_insufficient_context else ""
        typer.echo(prefix + response.answer.answer_text)
        ids = list(dict.fromkeys(c.source_id for c in response.answer.citations))
        if ids:
            typer.echo("citations: " + " ".join(ids))
    if response.status.value == "error":
        raise typer.Exit(EXIT_ERROR)
    if response.answer.is_insufficient_context:
        raise typer.Exit(EXIT_INSUFFICIENT)


@app.command()
def delete(
    documents: Annotated[
        list[str] | None, typer.Argument(help="doc_ids or paths of documents to delete")
    ] = None,
    collection: CollectionOpt = None,
    whole_collection: Annotated[
        bool, typer.Option("--whole-collection", help="Delete the collection itself")
    ] = False,
) -> None:
    """Delete documents (from every index and the catalog), or a whole collection."""
    if whole_collection and documents:
        raise _fail("give documents or --whole-collection, not both", EXIT_USAGE)
    if not whole_collection and not documents:
        raise _fail("name at least one document (doc_id or path)", EXIT_USAGE)
    given = _settings().default_collection if collection is None else collection
    # an older version accepted names that break today's rule: those can still be deleted
    name = given if whole_collection and _legacy_collection(given) else _collection(collection)
    s = _sleuth()
    try:
        if whole_collection:
            s.drop_collection(name)
            typer.echo(f"deleted collection {name}")
            return
        for doc in documents:
            s.pipeline.delete(name, doc)
            typer.echo(f"deleted {doc} from {name}")
    except SleuthError as exc:
        raise _fail(str(exc)) from exc
    finally:
        s.close()


def _legacy_collection(name: str) -> bool:
    """Whether ``name`` breaks the naming rule but exists in the catalog (older versions)."""
    from sleuth.errors import UserError
    from sleuth.store.catalog import validate_collection_name

    try:
        validate_collection_name(name)
        return False
    except UserError:
        pass
    s = _sleuth()
    try:
        return s.catalog.get_collection(name) is not None
    finally:
        s.close()


@app.command()
def collections(as_json: JsonOpt = False) -> None:
    """List collections with their embedding model and counts."""
    s = _sleuth()
    try:
        infos = s.catalog.list_collections()
    except SleuthError as exc:
        raise _fail(str(exc)) from exc
    if as_json:
        typer.echo(json.dumps([i.model_dump(mode="json") for i in infos], indent=2))
        return
    table = Table("collection", "documents", "chunks", "embedding model", "backend")
    for i in infos:
        table.add_row(
            i.name,
            str(i.n_documents),
            str(i.n_chunks),
            f"{i.embedding_model} ({i.dim}-d)",
            i.backend,
        )
    Console(highlight=False).print(table)


@app.command()
def demo(
    question: Annotated[str, typer.Option(help="Question to ask")] = DEMO_QUESTION,
    ascii_only: AsciiOpt = False,
) -> None:
    """Ingest the Python Language Reference shipped with CPython and answer a question."""
    from sleuth.ingest.progress import RichProgress
    from sleuth.ingest.pydoc_corpus import load_pydoc_topics

    started = time.perf_counter()
    s = _sleuth()
    err.print(
        f"sleuth demo: the Python Language Reference (pydoc_data.topics) → collection "
        f"'{DEMO_COLLECTION}' in {s.settings.data_dir}"
    )
    try:
        with RichProgress(err) as progress:
            report = s.pipeline.ingest_documents(
                [load_pydoc_topics()], DEMO_COLLECTION, progress=progress
            )
    except SleuthError as exc:
        raise _fail(str(exc)) from exc
    outcome = report.files[0]
    reused = outcome.status == "unchanged"
    err.print(
        f"index: {outcome.n_chunks} chunks, "
        + ("reused (unchanged)" if reused else f"built in {report.timings.total_s:.1f} s")
    )
    err.print(f"\n[bold]Q: {question}[/bold]\n")
    try:
        _ask(s, question, DEMO_COLLECTION, None, False, ascii_only, False)
    finally:
        err.print(f"[dim]demo finished in {time.perf_counter() - started:.1f} s[/dim]")


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


@app.command()
def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to bind (default: SLEUTH_API_HOST, 127.0.0.1)")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(min=1, max=65535, help="TCP port (default: SLEUTH_API_PORT, 8000)"),
    ] = None,
    log_level: Annotated[
        str, typer.Option(help="uvicorn log level: critical, error, warning, info, debug")
    ] = "info",
) -> None:
    """Serve the HTTP API (OpenAPI docs at /docs); needs the 'api' extra."""
    from sleuth.errors import require

    try:
        for module in ("fastapi", "uvicorn", "sse_starlette", "python_multipart"):
            require(module, "api", "sleuth serve (the HTTP API)")
    except SleuthError as exc:
        raise _fail(str(exc)) from exc
    if log_level not in ("critical", "error", "warning", "info", "debug", "trace"):
        raise _fail(f"--log-level must be critical, error, warning, info or debug, not "
                    f"'{log_level}'", EXIT_USAGE)  # fmt: skip
    settings = _settings()
    host = host or settings.api_host
    port = port or settings.api_port
    import uvicorn

    from sleuth.api import create_app

    try:
        application = create_app(settings)
    except SleuthError as exc:
        raise _fail(str(exc)) from exc
    if host not in LOOPBACK_HOSTS:
        err.print(f"[yellow]warning:[/yellow] binding {host}: the API is reachable from other "
                  "machines (every request still needs an API key)")  # fmt: skip
    err.print(f"sleuth API on http://{host}:{port} (docs: /docs); Ctrl-C stops it")
    uvicorn.run(application, host=host, port=port, log_level=log_level)


users_app = typer.Typer(
    help="Users of the HTTP API and their API keys.", no_args_is_help=True, add_completion=False
)
app.add_typer(users_app, name="users")


@users_app.command("create")
def users_create(name: Annotated[str, typer.Argument(help="The user's name (unique)")]) -> None:
    """Create a user; prints their API key (on stdout) this once: only its hash is kept."""
    from sleuth.api.keys import create_user, validate_user_name
    from sleuth.errors import UserError

    try:
        validate_user_name(name)
    except UserError as exc:
        raise _fail(str(exc), EXIT_USAGE) from exc
    s = _sleuth()
    try:
        user, key = create_user(s.catalog, name)
    except SleuthError as exc:
        raise _fail(str(exc)) from exc
    finally:
        s.close()
    err.print(f"created user {user.name} ({user.id}); the API key, shown this once:")
    typer.echo(key)


@users_app.command("list")
def users_list(as_json: JsonOpt = False) -> None:
    """List users (never their keys) with their collections."""
    s = _sleuth()
    try:
        users = s.catalog.list_users()
        owned = {u.id: [c.name for c in s.catalog.list_collections(owner=u.id)] for u in users}
    except SleuthError as exc:
        raise _fail(str(exc)) from exc
    finally:
        s.close()
    if as_json:
        rows = [{**u.model_dump(mode="json"), "collections": owned[u.id]} for u in users]
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table("user", "id", "created", "key", "collections")
    for u in users:
        table.add_row(
            u.name,
            u.id,
            u.created_at.strftime("%Y-%m-%d %H:%M"),
            "revoked" if u.disabled else "active",
            ", ".join(owned[u.id]) or "-",
        )
    Console(highlight=False).print(table)


@users_app.command("revoke")
def users_revoke(name: Annotated[str, typer.Argument(help="The user's name")]) -> None:
    """Revoke a user's API key: their requests answer 403 from now on."""
    s = _sleuth()
    try:
        s.catalog.set_user_disabled(name)
    except SleuthError as exc:
        raise _fail(str(exc)) from exc
    finally:
        s.close()
    typer.echo(f"revoked the API key of {name}")


@users_app.command("assign")
def users_assign(
    name: Annotated[str, typer.Argument(help="The user's name")],
    collection: Annotated[str, typer.Argument(help="An existing collection")],
) -> None:
    """Give a collection (e.g. one ingested with the CLI) to a user of the API."""
    name_of_collection = _collection(collection)
    s = _sleuth()
    try:
        user = s.catalog.get_user(name)
        if user is None:
            raise _fail(f"no user named '{name}' (see: sleuth users list)")
        s.catalog.set_collection_owner(name_of_collection, user.id)
    except SleuthError as exc:
        raise _fail(str(exc)) from exc
    finally:
        s.close()
    typer.echo(f"collection {name_of_collection} now belongs to {name}")


@app.command("mcp")
def mcp_server(
    transport: Annotated[
        str, typer.Option(help="stdio (for a client that starts it) | http (streamable HTTP)")
    ] = "stdio",
    host: Annotated[str, typer.Option(help="http: address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="http: TCP port")] = 8765,
    user: Annotated[
        str | None,
        typer.Option(
            help="stdio or --no-auth: user (name) the requests run as: their collections and "
            "memory (default: SLEUTH_MCP_USER; none: every collection, like the CLI)"
        ),
    ] = None,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth",
            help="http: serve without API keys, every request as --user (local, single user)",
        ),
    ] = False,
    collection: CollectionOpt = None,
) -> None:
    """Serve rag_search, read_section, list_collections and ask as MCP tools; needs the
    'mcp' extra. Over http every request needs an API key (Authorization: Bearer) and runs as
    its user, unless --no-auth."""
    if transport not in ("stdio", "http"):
        raise _fail(f"--transport must be stdio or http, not '{transport}'", EXIT_USAGE)
    keys = transport == "http" and not no_auth
    if keys and user is not None:
        raise _fail(
            "--user applies to stdio or --no-auth: over http each request's API key names its user",
            EXIT_USAGE,
        )
    name = _collection(collection) if collection is not None else None
    s = _sleuth()
    try:
        from sleuth.mcp.server import serve as serve_mcp

        serve_mcp(
            s,
            transport,  # type: ignore[arg-type]
            host=host,
            port=port,
            # SLEUTH_MCP_USER is a default for keyless serving: keys name their own users
            user=None if keys else user or s.settings.mcp_user,
            collection=name,
            auth=not no_auth,
        )
    except SleuthError as exc:
        raise _fail(str(exc)) from exc
    finally:
        s.close()


eval_app = typer.Typer(
    help="Evaluate sleuth on a dataset (retrieval, answers, citations, agent behaviour), or "
    "compare two evaluations. Run: sleuth eval --dataset hotpotqa|statutes|musique|PATH.",
    invoke_without_command=True,
)
app.add_typer(eval_app, name="eval")


@eval_app.callback(invoke_without_command=True)
def eval_run(
    ctx: typer.Context,
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            "-d",
            help="hotpotqa, statutes, or a JSONL file (or folder with questions.jsonl)",
        ),
    ] = None,
    mode: Annotated[str, typer.Option(help="react | guided")] = "react",
    llm: Annotated[
        str | None, typer.Option(help="Reasoner for this run (default: SLEUTH_LLM)")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions")] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Results folder (default: eval-results/<dataset>-<mode>-<llm>-<time>)"),
    ] = None,
    corpus: Annotated[
        list[Path] | None,
        typer.Option(help="Corpus file or folder to ingest for your own dataset (repeatable)"),
    ] = None,
    collection: Annotated[
        str | None,
        typer.Option("--collection", "-c", help="Search this existing collection (no ingest)"),
    ] = None,
    data_root: Annotated[
        Path | None,
        typer.Option(help="Folder holding hotpotqa/ and statutes/ (default: ../shared/data)"),
    ] = None,
    memory: Annotated[
        bool, typer.Option("--memory", help="Let runs recall earlier runs (off by default)")
    ] = False,
    max_iterations: Annotated[int | None, typer.Option(min=1, help="ReAct loop cap")] = None,
    timeout_s: Annotated[float | None, typer.Option(min=0.1, help="Per-run timeout (s)")] = None,
    workers: Annotated[
        int, typer.Option(min=1, max=64, help="Questions run at once (for remote models)")
    ] = 1,
    seed: Annotated[
        int | None,
        typer.Option(help="Shuffle the questions with this seed first (--limit: a sample)"),
    ] = None,
    price_in: Annotated[
        float | None, typer.Option(min=0.0, help="USD per million input tokens (for cost)")
    ] = None,
    price_out: Annotated[
        float | None, typer.Option(min=0.0, help="USD per million output tokens (for cost)")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as JSON (no progress bar)")
    ] = False,
) -> None:
    """Evaluate on a dataset: per-question JSONL, summary JSON, Markdown report, PNG plots."""
    if ctx.invoked_subcommand is not None:
        return
    if dataset is None:
        raise _fail(
            "give --dataset: hotpotqa, statutes, or the path of your JSONL questions "
            "(see 'sleuth eval --help')",
            EXIT_USAGE,
        )
    mode = mode.strip().lower()
    if mode not in ("react", "guided"):
        raise _fail(f"--mode must be react or guided, not '{mode}'", EXIT_USAGE)
    if corpus and collection is not None:
        raise _fail(
            "--corpus and --collection exclude each other: the corpus is ingested into the "
            "dataset's own collection, --collection searches an existing one as it is",
            EXIT_USAGE,
        )
    from sleuth.eval.datasets import load_dataset
    from sleuth.eval.report import write_results
    from sleuth.eval.runner import EvalConfig, run_eval

    try:
        data = load_dataset(dataset, data_root, corpus or ())
    except SleuthError as exc:
        raise _fail(str(exc), EXIT_USAGE) from exc
    if collection is not None:
        collection = _collection(collection)
    config = EvalConfig(
        mode=mode,
        limit=limit,
        use_memory=memory,
        max_iterations=max_iterations,
        timeout_s=timeout_s,
        price_input_per_mtok=price_in,
        price_output_per_mtok=price_out,
        workers=workers,
        seed=seed,
    )
    s = _eval_sleuth(llm)
    folder = _results_folder(out, data.name, mode, s.settings.llm)
    total = min(limit or len(data.questions), len(data.questions))
    try:
        if as_json:
            run = run_eval(s, data, config, collection)
        else:
            run = _eval_with_progress(s, data, config, collection, total)
        files = write_results(run, folder)
    except SleuthError as exc:
        _remove_if_empty(folder)
        raise _fail(str(exc)) from exc
    except BaseException:
        _remove_if_empty(folder)
        raise
    finally:
        s.close()
    summary = run.summary
    if as_json:
        typer.echo(json.dumps({**summary, "results_dir": str(folder)}, indent=2))
    else:
        _print_eval_summary(summary)
        for warning in _eval_warnings(run):
            err.print(Text.assemble(("warning:", "yellow"), " ", warning), soft_wrap=True)
        typer.echo(f"results: {folder}/ ({', '.join(f.name for f in files)})")
    if summary["interrupted"]:
        err.print(
            f"interrupted after {summary['questions']} of {summary['questions_planned']} "
            f"questions; the results of those are in {folder}/",
            soft_wrap=True,
        )
        raise typer.Exit(130)
    if summary["questions"] and summary["outcome"]["error_rate"] == 1.0:
        raise typer.Exit(EXIT_ERROR)


def _results_folder(out: Path | None, dataset: str, mode: str, llm: str) -> Path:
    """The results folder, created now (empty), so a bad path fails before any run.

    The default ``eval-results/<dataset>-<mode>-<llm>-<time>`` gets ``-2``, ``-3``... when
    another evaluation started in the same second.
    """
    if out is not None:
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise _fail(f"{out} exists and is not empty; choose another --out", EXIT_USAGE)
        candidates = [out]
    else:
        slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in llm)
        base = Path("eval-results") / f"{dataset}-{mode}-{slug}-{time.strftime('%Y%m%d-%H%M%S')}"
        candidates = [base, *(base.with_name(f"{base.name}-{n}") for n in range(2, 100))]
    for folder in candidates:
        try:
            folder.mkdir(parents=True, exist_ok=out is not None)
            probe = folder / ".write-test"
            probe.write_bytes(b"")
            probe.unlink()
            return folder
        except FileExistsError:
            continue
        except OSError as exc:
            raise _fail(
                f"cannot write the results to {folder}: {exc.strerror or exc}", EXIT_USAGE
            ) from exc
    raise _fail(f"could not create a results folder next to {candidates[0]}", EXIT_USAGE)


def _remove_if_empty(folder: Path) -> None:
    """Remove the results folder (and a default ``eval-results/`` parent) if still empty."""
    with contextlib.suppress(OSError):
        folder.rmdir()  # only if nothing was written
        if folder.parent.name == "eval-results":
            folder.parent.rmdir()


def _eval_warnings(run) -> list[str]:  # type: ignore[no-untyped-def]
    """What a user must not miss: failed runs, missing gold ids, corpus problems."""
    s = run.summary
    warnings = []
    errors = [r for r in run.records if r["status"] == "error"]
    if errors:
        warnings.append(
            f"{len(errors)} of {s['questions']} runs ended in status error (scored as "
            f"misses); the first: {errors[0]['error']}"
        )
    missing = s["collection"].get("gold_missing") or []
    if missing:
        shown = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        warnings.append(
            f"{len(missing)} gold source ids are not in collection "
            f"'{s['collection']['collection']}' ({shown}); questions citing them cannot score "
            "full recall — check the ids with 'sleuth search'"
        )
    ingest = s["collection"].get("ingest") or {}
    for failure in ingest.get("failures") or []:
        warnings.append(f"corpus file not ingested: {failure}")
    removed = ingest.get("removed_documents") or []
    if removed:
        warnings.append(
            f"removed {len(removed)} documents that are no longer in the corpus from "
            f"'{s['collection']['collection']}': {', '.join(removed[:5])}"
        )
    return warnings


def _eval_sleuth(llm: str | None):  # type: ignore[no-untyped-def]
    """A Sleuth whose reasoner is ``llm`` (when given) and the other settings as configured."""
    if llm is None:
        return _sleuth()
    from pydantic import ValidationError

    from sleuth.app import Sleuth
    from sleuth.llm.factory import parse_llm_spec

    try:
        parse_llm_spec(llm)
    except SleuthError as exc:
        message = str(exc).replace("SLEUTH_LLM=", "")
        raise _fail(f"--llm: {message}", EXIT_USAGE) from exc
    try:
        settings = Settings(llm=llm)
    except ValidationError as exc:
        for field, line in validation_messages(exc).items():
            _error_line(f"--llm: {line}" if field == "llm" else line)
        raise typer.Exit(EXIT_USAGE) from exc
    return Sleuth(settings)


def _eval_with_progress(s, data, config, collection, total):  # type: ignore[no-untyped-def]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from sleuth.eval.runner import prepare_collection, run_eval
    from sleuth.ingest.progress import RichProgress

    found = {"gold": 0, "runs": 0}
    bar = Progress(
        "[bold]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        "{task.fields[detail]}",
        console=err,
    )
    task = bar.add_task(f"{data.name} {config.mode}", total=total, detail="", start=False)

    def on_question(_index: int, record: dict) -> None:  # type: ignore[type-arg]
        if record["all_gold_retrieved"] is not None:
            found["runs"] += 1
            found["gold"] += bool(record["all_gold_retrieved"])
        detail = f"all gold retrieved {found['gold'] / found['runs']:.2f}" if found["runs"] else ""
        bar.start_task(task)
        bar.update(task, advance=1, detail=detail)

    if data.corpus and collection is None:
        with RichProgress(err) as ingest_progress:
            prepared = prepare_collection(s, data, collection, ingest_progress)
    else:
        prepared = prepare_collection(s, data, collection)
    with bar:
        return run_eval(s, data, config, collection, on_question, prepared)


def _print_eval_summary(summary: dict) -> None:  # type: ignore[type-arg]
    from sleuth.eval.report import fmt_value

    r, a, c, o = summary["retrieval"], summary["answer"], summary["citations"], summary["outcome"]
    table = Table(title=f"{summary['dataset']} · {summary['mode']} · {summary['reasoner']}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("questions", summary["questions"]),
        ("recall@5 / @10", f"{fmt_value(r['recall_at']['5'])} / {fmt_value(r['recall_at']['10'])}"),
        ("all gold retrieved", r["all_gold_retrieved"]),
        ("MRR", r["mrr"]),
        ("exact match / F1", f"{fmt_value(a['exact_match'])} / {fmt_value(a['f1'])}"),
        ("answer contains gold", a["answer_contains"]),
        ("citation precision / recall", f"{fmt_value(c['precision'])} / {fmt_value(c['recall'])}"),
        ("insufficient-context rate", o["insufficient_rate"]),
        ("error rate", o["error_rate"]),
        ("tool calls per run", summary["agent"]["tool_calls"]),
        (
            "latency p50 / p95 (s)",
            f"{fmt_value(summary['latency_s']['p50'])} / {fmt_value(summary['latency_s']['p95'])}",
        ),
    ]
    for name, value in rows:
        table.add_row(name, value if isinstance(value, str) else fmt_value(value))
    Console(highlight=False).print(table)


@eval_app.command("compare")
def eval_compare(
    a: Annotated[Path, typer.Argument(help="Results folder A (or its summary.json)")],
    b: Annotated[Path, typer.Argument(help="Results folder B (or its summary.json)")],
    as_json: JsonOpt = False,
) -> None:
    """Print two evaluations side by side with deltas (B - A)."""
    from sleuth.eval.report import (
        changed_questions,
        comparability_warnings,
        compare_rows,
        describe,
        fmt_value,
        load_summary,
    )

    try:
        sa, sb = load_summary(a), load_summary(b)
    except SleuthError as exc:
        raise _fail(str(exc), EXIT_USAGE) from exc
    rows = compare_rows(sa, sb)
    warnings = comparability_warnings(sa, sb)
    changed = changed_questions(a, b)
    if as_json:
        payload = {"a": str(a), "b": str(b), "warnings": warnings, "rows": rows}
        typer.echo(json.dumps({**payload, "changed_questions": changed}))
        return
    for warning in warnings:
        err.print(Text.assemble(("warning:", "yellow"), " ", warning), soft_wrap=True)
    out = Console(highlight=False)
    out.print(f"A: {a} ({describe(sa)})", soft_wrap=True)
    out.print(f"B: {b} ({describe(sb)})", soft_wrap=True)
    table = Table()
    for name, justify in (("metric", "left"), ("A", "right"), ("B", "right"), ("B - A", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        delta = row["delta"]
        text = "–" if delta is None else f"{delta + 0.0:+.3f}" if abs(delta) >= 5e-4 else "0"
        style = {"b": "green", "a": "red"}.get(row["better"] or "", "")
        table.add_row(
            row["metric"], fmt_value(row["a"]), fmt_value(row["b"]), Text(text, style=style)
        )
    out.print(table)
    if changed:
        shown = Table(title=f"Questions whose outcome changed ({len(changed)}; first 20)")
        for name in ("id", "question", "what", "A", "B"):
            shown.add_column(name)
        for c in changed[:20]:
            shown.add_row(c["id"], c["question"], c["change"], fmt_value(c["a"]), fmt_value(c["b"]))
        out.print(shown)


@app.command("config")
def show_config() -> None:
    """Print the settings in force (secrets masked); invalid values are marked."""
    values, problems = inspect_settings()
    for key, value in values.items():
        mark = "    # INVALID" if key in problems else ""
        typer.echo(f"SLEUTH_{key.upper()}={value}{mark}")
    for line in problems.values():
        _error_line(line)
    if problems:
        raise typer.Exit(EXIT_ERROR)


def _version(value: bool) -> None:
    if value:
        from sleuth import __version__

        typer.echo(f"sleuth {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit"
        ),
    ] = False,
) -> None:
    return None


def main() -> None:
    """Console-script entry point: no traceback reaches the user unless SLEUTH_DEBUG=1."""
    try:
        app()
    except SleuthError as exc:
        _error_line(str(exc))
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("SLEUTH_DEBUG", "").strip() not in ("", "0", "false", "no"):
            traceback.print_exc()
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        _error_line(f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": "))
        err.print("(set SLEUTH_DEBUG=1 for the traceback)", highlight=False, soft_wrap=True)
        sys.exit(EXIT_ERROR)
