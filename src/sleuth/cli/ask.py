"""``sleuth ask``: one agent run, its trace streamed live, then the cited answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from sleuth.cli import _common as common
from sleuth.cli._common import (
    EXIT_ERROR,
    EXIT_INSUFFICIENT,
    EXIT_USAGE,
    AsciiOpt,
    CollectionOpt,
    JsonOpt,
)
from sleuth.errors import SleuthError

if TYPE_CHECKING:
    from sleuth.app import Sleuth

ASK_MODES = ("react", "guided")


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
    no_rerank: Annotated[
        bool,
        typer.Option("--no-rerank", help="Do not rerank search results (SLEUTH_RERANK=off)"),
    ] = False,
    thread: Annotated[
        str | None,
        typer.Option(
            "--thread",
            help="Ask in this conversation thread (an id from --new-thread or sleuth chat): a "
            "follow-up is read in the thread's context",
        ),
    ] = None,
    new_thread: Annotated[
        bool,
        typer.Option("--new-thread", help="Start a conversation thread with this question"),
    ] = False,
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            envvar="SLEUTH_SERVER_URL",
            help="Ask a running `sleuth serve` at this URL (its models already loaded) "
            "instead of running the agent here",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="SLEUTH_API_KEY",
            help="With --server: an API key of `sleuth users create` (its user must own the "
            "collection)",
        ),
    ] = None,
) -> None:
    """Ask a question: the agent's trace streams live, then the cited answer."""
    if mode not in ASK_MODES:
        raise common.fail(f"--mode must be react or guided, not '{mode}'", EXIT_USAGE)
    common.runnable_question(question)
    if thread is not None and new_thread:
        raise common.fail("--thread and --new-thread exclude each other", EXIT_USAGE)
    if server:
        if no_rerank:
            raise common.fail(
                "--no-rerank applies to runs made here, not with --server", EXIT_USAGE
            )
        if collection is None and thread is None:
            raise common.fail("--server needs --collection (or --thread)", EXIT_USAGE)
        ask_server(
            server,
            api_key,
            question,
            common.collection_name(collection) if collection is not None else "",
            mode=mode,
            max_iterations=max_iterations,
            as_json=as_json,
            ascii_only=ascii_only,
            quiet=quiet,
            memory=not no_memory,
            thread_id=thread,
            new_thread=new_thread,
        )
        return
    # a bad name is refused before anything is opened (or created)
    name = common.collection_name(collection) if thread is None or collection else ""
    s = common.open_sleuth()
    if no_rerank:
        s.settings = s.settings.model_copy(update={"rerank": "off"})
    try:
        if thread is not None:
            info = s.agent.thread(thread, None)
            if collection is not None and collection != info.collection:
                raise common.fail(
                    f"thread '{thread}' belongs to collection '{info.collection}', "
                    f"not '{collection}'",
                    EXIT_USAGE,
                )
            name = info.collection
        if new_thread:
            s.kb.index(name)  # an unknown collection fails here, before a thread is made
            thread = s.catalog.create_thread(name, None).thread_id
    except SleuthError as exc:
        s.close()
        raise common.fail(str(exc)) from exc
    if new_thread and not as_json:
        common.info_line(f"thread {thread} (ask follow-ups with --thread {thread})")
    run_ask(
        s,
        question,
        name,
        max_iterations=max_iterations,
        as_json=as_json,
        ascii_only=ascii_only,
        quiet=quiet,
        mode=mode,
        memory=not no_memory,
        thread_id=thread,
    )


def run_ask(
    s: Sleuth,
    question: str,
    collection: str,
    *,
    max_iterations: int | None = None,
    as_json: bool = False,
    ascii_only: bool = False,
    quiet: bool = False,
    mode: str = "react",
    memory: bool = True,
    thread_id: str | None = None,
    close: bool = True,
) -> None:
    """Run the agent on ``question`` over ``collection`` (a turn of ``thread_id`` when given)
    and print the outcome; closes ``s`` unless ``close`` is false.

    Raises:
        typer.Exit: 1 for a sleuth error or a run that ended in status ``error``, 3 for an
            insufficient-context answer (nothing is raised for a cited answer).
    """
    from sleuth.trace import TraceRenderer

    renderer = TraceRenderer(ascii_only=ascii_only)
    sinks = [] if (as_json or quiet) else [renderer]
    try:
        response = s.agent.execute_agentic_search(
            question,
            collection,
            mode=mode,  # type: ignore[arg-type]
            max_iterations=max_iterations,
            sinks=sinks,
            use_memory=memory,
            thread_id=thread_id,
        )
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    finally:
        if close:
            s.close()
    if not as_json:  # MCP servers whose tools could not be offered
        for warning in (response.trace.get("mcp") or {}).get("warnings", []):
            common.warning_line(warning)
    if as_json:
        typer.echo(response.model_dump_json(indent=2))
    elif quiet and response.status.value == "error":
        pass  # the error line below says it; the answer text is the failure's echo
    elif quiet:
        answer = response.answer
        print_quiet(
            answer.answer_text,
            answer.is_insufficient_context,
            list(dict.fromkeys(c.source_id for c in answer.citations)),
        )
    if response.status.value == "error":
        reason = response.trace.get("error") or "the run failed"
        common.error_line(" ".join(str(reason).split()))
        raise typer.Exit(EXIT_ERROR)
    if response.answer.is_insufficient_context:
        raise typer.Exit(EXIT_INSUFFICIENT)


def ask_server(
    url: str,
    api_key: str | None,
    question: str,
    collection: str,
    *,
    mode: str,
    max_iterations: int | None,
    as_json: bool,
    ascii_only: bool,
    quiet: bool,
    memory: bool,
    thread_id: str | None,
    new_thread: bool,
) -> None:
    """The run made by the ``sleuth serve`` at ``url`` (:mod:`sleuth.cli.remote`), its
    trace and answer printed as :func:`run_ask` prints a local run's, with the same exit
    codes; ``--json`` prints the API's response body."""
    import json

    from sleuth.cli.remote import (
        RemoteError,
        ask_remote,
        check_target,
        create_thread,
        thread_collection,
    )
    from sleuth.trace import TraceRenderer

    try:
        check_target(url, api_key)
    except ValueError as exc:
        raise common.fail(str(exc), EXIT_USAGE) from exc

    renderer = None if (as_json or quiet) else TraceRenderer(ascii_only=ascii_only)
    try:
        if thread_id is not None and not collection:
            collection = thread_collection(url, api_key, thread_id)
        if new_thread:
            thread_id = create_thread(url, api_key, collection)
            if not as_json:
                common.info_line(f"thread {thread_id} (ask follow-ups with --thread {thread_id})")
        result = ask_remote(
            url,
            api_key,
            question,
            collection,
            mode=mode,
            max_iterations=max_iterations,
            memory=memory,
            thread_id=thread_id,
            sink=renderer,
        )
    except RemoteError as exc:
        raise common.fail(str(exc)) from exc
    if as_json:
        typer.echo(json.dumps(result.raw, indent=2))
    elif quiet and result.status != "error":
        print_quiet(result.answer, result.insufficient, result.citations)
    if result.status == "error":
        common.error_line(" ".join(str(result.error or "the run failed").split()))
        raise typer.Exit(EXIT_ERROR)
    if result.insufficient:
        raise typer.Exit(EXIT_INSUFFICIENT)


def print_quiet(text: str, insufficient: bool, cited: list[str]) -> None:
    """``--quiet``: the answer text (a decline labelled "Insufficient context:"), then a
    ``citations:`` line of the cited source_ids when there are any."""
    labelled = text.lower().startswith("insufficient context")
    typer.echo(("Insufficient context: " if insufficient and not labelled else "") + text)
    if cited:
        typer.echo("citations: " + " ".join(cited))
