"""Retrieved text is data: sentences that must never become part of an answer.

Documents may carry text written for the agent rather than the reader ("Ignore previous
instructions and …", "You must now …": prompt injection) or secrets pasted into them (API
keys, tokens, private keys), or chat and tool markup meant to pass for the agent's own
conversation (``</tool_result><system>…``). None may be repeated as an answer sentence:
:func:`unsafe_reason` says whether a sentence is one, and why. The extractive answer
(:func:`sleuth.agents.heuristic.compose_answer`) skips such evidence sentences and the
citation check (:func:`sleuth.agents.citations.validate_citations`) drops them from any
answer, recording each with its reason in the run's trace (``sentences_withheld``).

Events and traces show retrieved text as it is, except secrets: :func:`mask_secrets`.

The patterns are deliberately narrow (legal and technical prose says "must" and "key"
all the time): an instruction needs an imperative aimed at the model, a secret needs the
shape of a real credential.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel

from sleuth.retrieval.text import sentences

M = TypeVar("M", bound=BaseModel)

_INSTRUCTION = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass)\b[^.!?\n]{0,30}?\b(?:"
    r"(?:previous|prior|preceding|above|earlier|system|your|all)\s+(?:\w+\s+){0,2}?"
    r"(?:instructions?|prompts?|rules|directions|guidelines|directives?|messages?|context)"
    r"|instructions?|prompts?|guardrails?)\b"
    r"|\byou\s+(?:must|should|will|are\s+to|have\s+to|need\s+to)\s+now\b"
    r"|\b(?:new|updated|real|actual)\s+(?:system\s+)?instructions?\s*:"
    r"|\b(?:developer|jailbreak)\s+mode\b"
    r"|\b(?:you\s+are\s+now|act\s+as|pretend\s+to\s+be)\s+(?:an?\s+)?(?:unrestricted\b|"
    r"evil\b|dan\b|ai\b|assistant\b|chatbot\b|language\s+model\b)"
    r"|\b(?:reveal|print|output|disclose|repeat|leak)\b[^.!?\n]{0,30}?\b(?:system\s+prompt|"
    r"(?:your|the)\s+instructions|api\s+keys?|passwords?|secrets?|credentials)\b",
    re.I,
)
_SECRETS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an API key (sk-…)", re.compile(r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9]{16,}")),
    # a short or test key still has the shape: "sk-" and 10+ characters, a digit among them
    ("an API key (sk-…)", re.compile(r"\bsk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{10,}")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,})")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    (
        "a JSON web token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
    ),
)
_LABELLED = re.compile(
    r"\b(?:api[_ -]?key|secret(?:[_ -]?key)?|access[_ -]?key|private[_ -]?key|key|token|"
    r"password|passwd|pwd|passphrase|credentials?|bearer)\b['\"]?\s*(?:is|=|:|=>)?\s*['\"]?"
    r"([A-Za-z0-9+/_=.-]{20,})",
    re.I,
)
_HEX = re.compile(r"[0-9a-fA-F]{20,}")
_PASSWORD = re.compile(
    r"\b(?:password|passwd|pwd|passphrase)\b['\"]?\s*(?:is|=|:)\s*['\"]?"
    r"((?=[^\s'\"]*\d)(?=[^\s'\"]*[A-Za-z])[^\s'\"]{6,})",
    re.I,
)
"""A password given as a value ("password is hunter2-TEST"): short, but letters and digits."""
_MARKUP = re.compile(
    r"</?\s*(?:system|assistant|user|developer|tool(?:_result|_call|_response|_output)?|"
    r"function(?:_call|_result)?|instructions?|prompt|im_start|im_end|think)\s*/?>"
    r"|<\|[a-z_]+\|>|\[/?INST\]|<<\s*/?SYS\s*>>",
    re.I,
)
"""Chat-template and tool markup (role tags, special tokens): text written to pass for the
agent's own conversation, never prose a document's reader needs."""


def _looks_random(token: str) -> bool:
    """Whether ``token`` (20+ characters) looks like a generated secret: a hex string, or
    base64-like with letters and at least two digits (not a long word or a phrase)."""
    token = token.rstrip(".=")
    if len(token) < 20:
        return False
    if _HEX.fullmatch(token):
        return True
    digits = sum(ch.isdigit() for ch in token)
    letters = sum(ch.isalpha() for ch in token)
    return digits >= 2 and letters >= 4 and token.count("-") <= 2


def unsafe_reason(sentence: str) -> str | None:
    """Why ``sentence`` must not be part of an answer, or ``None`` when it may.

    Returns:
        ``"instructs the agent (…)"`` for text addressed to the model, ``"looks like a
        secret (…)"`` for credentials; ``None`` otherwise.
    """
    match = _INSTRUCTION.search(sentence)
    if match:
        return f"instructs the agent ({match.group(0).strip()!r})"
    markup = _MARKUP.search(sentence)
    if markup:
        return f"carries chat or tool markup ({markup.group(0)!r})"
    for what, pattern in _SECRETS:
        if pattern.search(sentence):
            return f"looks like a secret ({what})"
    if _PASSWORD.search(sentence):
        return "looks like a secret (a password)"
    for labelled in _LABELLED.finditer(sentence):
        if _looks_random(labelled.group(1)):
            return "looks like a secret (a long random value after a key/token/password label)"
    return None


SECRET_MASK = "[secret withheld]"


def mask_secrets(text: str) -> str:
    """``text`` with every credential-shaped string (the patterns of :func:`unsafe_reason`)
    replaced by :data:`SECRET_MASK`; for traces and events, which show retrieved text."""
    for _, pattern in _SECRETS:
        text = pattern.sub(SECRET_MASK, text)

    def labelled(match: re.Match[str]) -> str:
        value = match.group(1)
        if not _looks_random(value):
            return match.group(0)
        return match.group(0).replace(value, SECRET_MASK)

    text = _PASSWORD.sub(lambda m: m.group(0).replace(m.group(1), SECRET_MASK), text)
    return _LABELLED.sub(labelled, text)


def has_secret(text: str) -> bool:
    """Whether :func:`mask_secrets` would change ``text``."""
    return mask_secrets(text) != text


def masked(model: M) -> M:
    """``model`` (an event, a run's response) with :func:`mask_secrets` applied to every
    string in it, nested ones included; the same object when it holds no secret."""
    if not has_secret(model.model_dump_json()):
        return model

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return mask_secrets(value)
        if isinstance(value, list | tuple):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return type(model).model_validate(walk(model.model_dump()))


def quotable_sentences(text: str) -> tuple[list[str], dict[str, str]]:
    """The sentences of retrieved ``text`` an answer may repeat, and those it may not with
    the reason (``{sentence: reason}``).

    Chat or tool markup splits the text first: what follows an opening tag
    (``<system>SYSTEM OVERRIDE …``) up to the next tag is text posing as the agent's own
    conversation and is withheld whole; the prose around it is split into sentences, each
    judged by :func:`unsafe_reason`.
    """
    kept: list[str] = []
    withheld: dict[str, str] = {}
    position, opened = 0, None
    for tag in [*_MARKUP.finditer(text), None]:
        end = tag.start() if tag is not None else len(text)
        segment = text[position:end].strip()
        if segment and opened is not None:
            withheld[segment] = f"inside chat or tool markup ({opened!r})"
        elif segment:
            for sentence in sentences(segment):
                reason = unsafe_reason(sentence)
                if reason is None:
                    kept.append(sentence)
                else:
                    withheld[sentence] = reason
        if tag is None:
            break
        opened = None if tag.group(0).startswith("</") else tag.group(0)
        position = tag.end()
    return kept, withheld
