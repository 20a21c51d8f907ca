"""Retrieved text is data: sentences that must never become part of an answer.

Documents may carry text written for the agent rather than the reader ("Ignore previous
instructions and …", "You must now …": prompt injection) or secrets pasted into them (API
keys, tokens, private keys). Neither may be repeated as an answer sentence:
:func:`unsafe_reason` says whether a sentence is one, and why. The extractive answer
(:func:`sleuth.agents.heuristic.compose_answer`) skips such evidence sentences and the
citation check (:func:`sleuth.agents.citations.validate_citations`) drops them from any
answer, recording each with its reason in the run's trace (``sentences_withheld``).

The patterns are deliberately narrow (legal and technical prose says "must" and "key"
all the time): an instruction needs an imperative aimed at the model, a secret needs the
shape of a real credential.
"""

from __future__ import annotations

import re

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
    for what, pattern in _SECRETS:
        if pattern.search(sentence):
            return f"looks like a secret ({what})"
    for labelled in _LABELLED.finditer(sentence):
        if _looks_random(labelled.group(1)):
            return "looks like a secret (a long random value after a key/token/password label)"
    return None
