"""``sleuth chat``: an interactive conversation over a collection, with follow-ups.

Every question is a turn of one conversation thread (stored in the catalog, so a chat can be
taken up again with ``--thread``): a follow-up such as "And for an attempt?" is made
standalone from the thread's last turns before anything is searched, and the rewrite is
shown in the trace. The live trace and the cited answer are those of ``sleuth ask``.

Commands at the prompt: ``/new`` starts a new thread, ``/history`` shows the thread's turns,
``/exit`` (or Ctrl-D) leaves.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Annotated

import typer

from sleuth.cli import _common as common
from sleuth.cli._common import EXIT_USAGE, AsciiOpt, CollectionOpt
from sleuth.errors import SleuthError

if TYPE_CHECKING:
    from sleuth.app import Sleuth

PROMPT = "you> "
HELP = "Ask a question; /new starts a new thread, /history shows this one, /exit leaves."


def chat(
    collection: CollectionOpt = None,
    mode: Annotated[str, typer.Option(help="react (autonomous loop) | guided (typed agents)")] = (
        "guided"
    ),
    thread: Annotated[
        str | None, typer.Option("--thread", help="Take up this thread (default: a new one)")
    ] = None,
    ascii_only: AsciiOpt = False,
    no_memory: Annotated[
        bool, typer.Option("--no-memory", help="Neither recall past runs nor remember these")
    ] = False,
) -> None:
    """Chat with a collection: follow-up questions are read in the conversation's context."""
    from sleuth.cli.ask import ASK_MODES, run_ask

    if mode not in ASK_MODES:
        raise common.fail(f"--mode must be react or guided, not '{mode}'", EXIT_USAGE)
    # a bad name is refused before anything is opened (or created)
    name = common.collection_name(collection) if thread is None or collection else ""
    s = common.open_sleuth()
    try:
        if thread is not None:
            name = s.agent.thread(thread, None).collection
            if collection is not None and collection != name:
                raise common.fail(
                    f"thread '{thread}' belongs to collection '{name}', not '{collection}'",
                    EXIT_USAGE,
                )
        else:
            s.kb.index(name)  # an unknown collection fails here, before the prompt
            thread = s.catalog.create_thread(name, None).thread_id
        common.info_line(f"thread {thread} over '{name}' ({mode}). {HELP}")
        while True:
            try:
                line = input(PROMPT).strip()
            except (EOFError, KeyboardInterrupt):
                common.info_line("")
                break
            if not line:
                continue
            if line in ("/exit", "/quit"):
                break
            if line == "/new":
                thread = s.catalog.create_thread(name, None).thread_id
                common.info_line(f"new thread {thread}")
                continue
            if line == "/history":
                _history(s, thread)
                continue
            if line.startswith("/"):
                common.info_line(f"unknown command {line.split()[0]}. {HELP}")
                continue
            # an insufficient-context answer or a failed run ends in typer.Exit: the chat goes on
            with contextlib.suppress(typer.Exit):
                run_ask(
                    s,
                    line,
                    name,
                    ascii_only=ascii_only,
                    mode=mode,
                    memory=not no_memory,
                    thread_id=thread,
                    close=False,
                )
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    finally:
        s.close()


def _history(s: Sleuth, thread_id: str) -> None:
    """Print the thread's turns: question, its standalone rewrite, cited sections."""
    turns = s.catalog.thread_turns(thread_id)
    if not turns:
        common.info_line("no turns yet")
    for turn in turns:
        common.info_line(f"{turn.position + 1}. {turn.question}")
        if turn.rewritten_question:
            common.info_line(f"   (searched as: {turn.rewritten_question})")
        cited = ", ".join(turn.citations) or "none"
        common.info_line(f"   {turn.status}; cited: {cited}")
