"""Users and collection owners in the SQLite catalog (the same scenario runs on PostgreSQL
in tests/integration/test_catalog_postgres.py)."""

from __future__ import annotations

from pathlib import Path

from sleuth.store.catalog import Catalog
from tests.helpers import check_users_and_owners


def test_users_and_collection_owners_on_sqlite(tmp_path: Path) -> None:
    catalog = Catalog(f"sqlite:///{tmp_path / 'catalog.sqlite3'}")
    try:
        check_users_and_owners(catalog)
    finally:
        catalog.close()


def test_an_older_catalog_gains_the_user_tables(tmp_path: Path) -> None:
    """A catalog made before users existed opens unchanged and gets the new tables."""
    import sqlite3

    path = tmp_path / "old.sqlite3"
    Catalog(f"sqlite:///{path}").ensure_collection("laws", "m", 8, "local")
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE collection_owners")
        db.execute("DROP TABLE users")
    catalog = Catalog(f"sqlite:///{path}")
    try:
        assert catalog.collection_owner("laws") is None
        assert [c.name for c in catalog.list_collections(owner="u_x")] == []
        assert catalog.list_users() == []
    finally:
        catalog.close()
