"""``sleuth users …``: users of the HTTP API and their API keys (catalog only)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from sleuth.cli import _common as common
from sleuth.cli._common import EXIT_USAGE, JsonOpt, err
from sleuth.errors import SleuthError

users_app = typer.Typer(
    help="Users of the HTTP API and their API keys.", no_args_is_help=True, add_completion=False
)


@users_app.command("create")
def users_create(name: Annotated[str, typer.Argument(help="The user's name (unique)")]) -> None:
    """Create a user; prints their API key (on stdout) this once: only its hash is kept."""
    from sleuth.api.keys import create_user, validate_user_name
    from sleuth.errors import UserError

    try:
        validate_user_name(name)
    except UserError as exc:
        raise common.fail(str(exc), EXIT_USAGE) from exc
    s = common.open_sleuth()
    try:
        user, key = create_user(s.catalog, name)
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    finally:
        s.close()
    err.print(f"created user {user.name} ({user.id}); the API key, shown this once:")
    typer.echo(key)


@users_app.command("list")
def users_list(as_json: JsonOpt = False) -> None:
    """List users (never their keys) with their collections."""
    s = common.open_sleuth()
    try:
        users = s.catalog.list_users()
        owned = {u.id: [c.name for c in s.catalog.list_collections(owner=u.id)] for u in users}
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
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
    common.stdout_console().print(table)


@users_app.command("revoke")
def users_revoke(name: Annotated[str, typer.Argument(help="The user's name")]) -> None:
    """Revoke a user's API key: their requests answer 403 from now on."""
    s = common.open_sleuth()
    try:
        s.catalog.set_user_disabled(name)
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    finally:
        s.close()
    typer.echo(f"revoked the API key of {name}")


@users_app.command("rotate")
def users_rotate(name: Annotated[str, typer.Argument(help="The user's name")]) -> None:
    """Issue a new API key (printed on stdout this once); the old key stops working now."""
    from sleuth.api.keys import rotate_key

    s = common.open_sleuth()
    try:
        user, key = rotate_key(s.catalog, name)
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    finally:
        s.close()
    err.print(f"new API key for {user.name} ({user.id}), shown this once; the old one is revoked:")
    typer.echo(key)


@users_app.command("assign")
def users_assign(
    name: Annotated[str, typer.Argument(help="The user's name")],
    collection: Annotated[str, typer.Argument(help="An existing collection")],
) -> None:
    """Give a collection (e.g. one ingested with the CLI) to a user of the API."""
    name_of_collection = common.collection_name(collection)
    s = common.open_sleuth()
    try:
        user = s.catalog.get_user(name)
        if user is None:
            raise common.fail(f"no user named '{name}' (see: sleuth users list)")
        s.catalog.set_collection_owner(name_of_collection, user.id)
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    finally:
        s.close()
    typer.echo(f"collection {name_of_collection} now belongs to {name}")
