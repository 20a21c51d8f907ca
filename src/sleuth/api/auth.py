"""Authentication: ``Authorization: Bearer <API key>`` → the user (a FastAPI dependency).

401 when the key is missing, malformed or unknown (with ``WWW-Authenticate: Bearer``); 403
when it belongs to a user whose key was revoked (``sleuth users revoke NAME``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from sleuth.api.keys import authenticate
from sleuth.api.state import ApiState, get_state
from sleuth.store.catalog import UserInfo

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="API key",
    description="An API key made by `sleuth users create NAME`, sent as "
    "`Authorization: Bearer <key>`",
)


def current_user(
    state: Annotated[ApiState, Depends(get_state)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> UserInfo:
    """The user whose API key the request carries.

    Every authenticated request counts against the user's rate (``SLEUTH_API_USER_RATE``).

    Raises:
        HTTPException: 401 (no key, or not a valid key), 403 (the key was revoked) or 429
            (the user's request rate is spent; ``Retry-After`` says when to retry).
    """
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        raise HTTPException(
            401, "missing API key: send the header 'Authorization: Bearer <key>'", challenge
        )
    user = authenticate(state.sleuth.catalog, credentials.credentials)
    if user is None:
        raise HTTPException(401, "invalid API key", challenge)
    if user.disabled:
        raise HTTPException(403, f"the API key of user '{user.name}' has been revoked")
    state.limits.check_rate(user.id)
    return user


CurrentUser = Annotated[UserInfo, Depends(current_user)]
State = Annotated[ApiState, Depends(get_state)]
