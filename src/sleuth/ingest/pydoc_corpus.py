"""The Python Language Reference topics shipped with CPython, as one Document.

``pydoc_data.topics.topics`` maps a topic key (``"assignment"``, ``"atom-identifiers"``...)
to the plain-text rendering of a Language Reference section: its title underlined with
``*``, sub-headings underlined with ``=``, ``-`` and ``~``. It needs no download.
"""

from __future__ import annotations

import hashlib
import sys

from sleuth.errors import IngestError
from sleuth.ingest.chunking import slugify
from sleuth.ingest.loaders import split_underlined_headings
from sleuth.types import Document, Section

PYREF_DOC_ID = "pyref"
PYREF_TITLE = "Python Language Reference"
_LEVELS = {"*": 1, "=": 2, "-": 3, "~": 4, "^": 5}


def load_pydoc_topics() -> Document:
    """Load every pydoc topic as sections of one document.

    Returns:
        Document ``doc_id="pyref"``, title ``"Python Language Reference"``, ``path`` the
        ``pydoc_data.topics`` module file, ``content_hash`` = sha256 of the topic texts joined
        by newlines (in key order). One Section per heading: ``title_path`` =
        ``["Python Language Reference", topic title, sub-heading, ...]``; ``source_id`` =
        ``pyref_<key>`` (``-`` -> ``_``) for a topic's top section and
        ``pyref_<key>_<slug(sub-heading)>`` below it (``_2``... when repeated). Section
        metadata: ``topic`` (the key). Document metadata: ``python_version``, ``topics``.

    Raises:
        IngestError: ``pydoc_data`` is missing from this Python installation.
    """
    try:
        from pydoc_data import topics as topics_module
    except ImportError as exc:  # some distributions strip pydoc_data
        raise IngestError("pydoc_data.topics", "pydoc_data is not installed with Python") from exc
    topics: dict[str, str] = dict(sorted(topics_module.topics.items()))
    sections: list[Section] = []
    used: set[str] = set()
    for key, text in topics.items():
        base = f"{PYREF_DOC_ID}_{key.replace('-', '_')}"
        for chain, body in split_underlined_headings(text, _LEVELS):
            if not chain:  # text before the topic title: attach to the topic itself
                chain = [key]
            source_id = base if len(chain) == 1 else f"{base}_{slugify(chain[-1]) or 'part'}"
            candidate, n = source_id, 1
            while candidate in used:
                n += 1
                candidate = f"{source_id}_{n}"
            used.add(candidate)
            sections.append(
                Section(
                    title_path=[PYREF_TITLE, *chain],
                    text=body,
                    source_id=candidate,
                    metadata={"topic": key},
                )
            )
    joined = "\n".join(topics.values())
    return Document(
        doc_id=PYREF_DOC_ID,
        path=str(getattr(topics_module, "__file__", "pydoc_data.topics")),
        title=PYREF_TITLE,
        content_hash=hashlib.sha256(joined.encode("utf-8")).hexdigest(),
        sections=sections,
        metadata={
            "python_version": ".".join(str(v) for v in sys.version_info[:3]),
            "topics": len(topics),
            "format": "pydoc",
        },
    )
