"""The error tree of sleuth.

``SleuthError`` is the root. ``UserError`` (and its children) is the caller's fault and
is shown as a one-line message with a non-zero exit code, never as a traceback.
"""

from __future__ import annotations


class SleuthError(Exception):
    """Base class of every error sleuth raises on purpose."""


class UserError(SleuthError):
    """Bad input from the caller: a missing file, a bad option, an unknown collection."""


class NotFoundError(UserError):
    """The caller named something that does not exist, or is not theirs (a thread of another
    user): the two are not told apart."""


class ConfigError(UserError):
    """Invalid or inconsistent configuration (settings, env vars, collection metadata)."""


class MissingExtraError(ConfigError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, extra: str, package: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the optional package '{package}': "
            f'install it with  pip install "sleuth[{extra}]"'
        )
        self.extra = extra
        self.package = package


class IngestError(SleuthError):
    """A document could not be read or parsed (corrupt, encrypted, no text)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class EmbeddingModelMismatch(ConfigError):
    """A collection was opened with another embedding model than the one it was built with."""


class ToolError(SleuthError):
    """A tool failed; the agent sees the message as an observation."""


def require(module: str, extra: str, purpose: str) -> object:
    """Import an optional dependency lazily.

    Args:
        module: the module to import, e.g. ``"pymilvus"``.
        extra: the sleuth extra that installs it, e.g. ``"milvus"``.
        purpose: what needs it, shown in the error message.

    Returns:
        The imported module.

    Raises:
        MissingExtraError: the module is not installed.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(extra, module.split(".")[0], purpose) from exc


class ModelDeadlineExceeded(SleuthError):
    """A model call was not started, or not waited for, because the run's deadline passed
    (``SLEUTH_RUN_TIMEOUT_S`` or the request's ``timeout_s``)."""


class ContextWindowExceeded(SleuthError):
    """The model server refused a prompt longer than its context window (an HTTP 400 that
    says so): a configuration fault (``SLEUTH_LLM_CONTEXT_TOKENS``), not missing evidence."""


def describe_failure(exc: BaseException) -> str:
    """A run failure as one line: sleuth's own errors (written for users) as their message,
    anything else with its type ("KeyError: 'x'"), so the CLI, API and trace word the same
    failure the same way in both modes."""
    return str(exc) if isinstance(exc, SleuthError) else f"{type(exc).__name__}: {exc}"
