"""API keys and users: a key is a random token shown once; the catalog keeps only its hash.

A key reads ``sleuth_<user>.<secret>``: ``<user>`` is the 16 hex digits of the user's id
(``u_<user>``, not secret) and ``<secret>`` 43 URL-safe characters (32 bytes, 256 bits, from
:mod:`secrets`). The catalog stores the SHA-256 hex digest of the whole key. A fast, unsalted
hash is enough here, unlike for passwords: the secret is uniformly random with 256 bits of
entropy, so no dictionary or brute-force search can find a key from its digest, and a slow
KDF would only add latency to every request. Authentication finds the user by the id part
(a lookup that does not depend on the secret), then compares the digests with
:func:`hmac.compare_digest`, in constant time.

No FastAPI here: the CLI (``sleuth users create``) uses this module without the ``api`` extra.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from sleuth.errors import UserError
from sleuth.store.catalog import Catalog, UserInfo

KEY_PREFIX = "sleuth_"
SECRET_BYTES = 32
USER_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
USER_NAME_RULE = (
    "1 to 64 characters: letters, digits, '_', '.', '@' or '-', starting with a letter or digit"
)
_KEY_PATTERN = re.compile(r"sleuth_([0-9a-f]{16})\.([A-Za-z0-9_-]{20,128})")


def hash_api_key(key: str) -> str:
    """The SHA-256 hex digest stored for ``key`` (64 characters)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def validate_user_name(name: str) -> str:
    """Check a user name (:data:`USER_NAME_RULE`); returns it unchanged.

    Raises:
        UserError: the name breaks the rule (the message states it).
    """
    if not USER_NAME_PATTERN.fullmatch(name or ""):
        raise UserError(f"invalid user name {name!r}: a name is {USER_NAME_RULE}")
    return name


def create_user(catalog: Catalog, name: str) -> tuple[UserInfo, str]:
    """Create a user and their API key.

    Returns:
        ``(user, key)``: the key is returned this once; only its hash is stored.

    Raises:
        UserError: an invalid name, or a user with this name exists already.
    """
    validate_user_name(name)
    user_hex = secrets.token_hex(8)
    key = f"{KEY_PREFIX}{user_hex}.{secrets.token_urlsafe(SECRET_BYTES)}"
    user = catalog.add_user("u_" + user_hex, name, hash_api_key(key))
    return user, key


def rotate_key(catalog: Catalog, name: str) -> tuple[UserInfo, str]:
    """Issue a new API key for the user ``name``; the old one is revoked at once (its hash
    is replaced) and a revoked user is active again.

    Returns:
        ``(user, key)``: the new key, returned this once.

    Raises:
        UserError: no user named ``name``.
    """
    user = catalog.get_user(name)
    if user is None:
        raise UserError(f"no user named '{name}' (see: sleuth users list)")
    key = f"{KEY_PREFIX}{user.id.removeprefix('u_')}.{secrets.token_urlsafe(SECRET_BYTES)}"
    return catalog.set_user_key(name, hash_api_key(key)), key


def authenticate(catalog: Catalog, key: str) -> UserInfo | None:
    """The user holding ``key`` (disabled users included: the caller decides), or ``None``
    for a malformed or unknown key."""
    match = _KEY_PATTERN.fullmatch(key)
    if match is None:
        return None
    found = catalog.user_key_hash("u_" + match.group(1))
    if found is None:
        return None
    user, stored = found
    return user if hmac.compare_digest(stored.encode(), hash_api_key(key).encode()) else None
