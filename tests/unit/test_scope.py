"""A question naming a document the collection does not hold is declined with what it holds."""

from __future__ import annotations

import pytest

from sleuth.agents.scope import named_documents, not_held
from tests.helpers import make_service

HELD = [
    "The Bharatiya Nagarik Suraksha Sanhita, 2023",
    "The Bharatiya Nyaya Sanhita, 2023",
    "The Bharatiya Sakshya Adhiniyam, 2023",
]


@pytest.mark.parametrize(
    ("question", "missing"),
    [
        (
            "Who is a consumer under the Consumer Protection Act, 2019?",
            ["Consumer Protection Act, 2019"],
        ),
        ("What does section 302 of the Indian Penal Code say?", ["Indian Penal Code"]),
        # a title that opens with its kind (declined as "closest sections" before)
        (
            "What is the punishment for murder under the Code of Criminal Procedure?",
            ["Code of Criminal Procedure"],
        ),
        ("What does the Code say on theft?", []),
        ('What genre is the author of "Act of Mercy; Second Dawn" associated with?', []),
        ("What is the Right to Information Act?", ["Right to Information Act"]),
        ("Is bail a right under The Bharatiya Nagarik Suraksha Sanhita, 2023?", []),
        ("What does the Bharatiya Nyaya Sanhita say on theft?", []),  # no year: still held
        # one named document is held: answered (it may compare the two)
        ("Compare the Bharatiya Nyaya Sanhita and the Indian Penal Code on murder.", []),
        ("What is the punishment for murder?", []),  # names no document
        ("How does This Act define a child?", []),  # "This Act" names nothing
    ],
)
def test_named_documents_the_collection_does_not_hold(question: str, missing: list[str]) -> None:
    assert not_held(question, HELD) == missing


def test_a_section_title_that_mentions_an_act_does_not_hold_it() -> None:
    # a BNS section's title cites the BNSS: the BNSS is still not in a BNS-only collection
    # (the new-user question about BNSS section 35 was answered from BNS sections)
    bns = ["The Bharatiya Nyaya Sanhita, 2023"]
    mentioning = [
        "Section 209. Non-appearance in response to a proclamation under section 84 of "
        "Bharatiya Nagarik Suraksha Sanhita, 2023."
    ]
    question = "What does section 35 of the Bharatiya Nagarik Suraksha Sanhita say on arrest?"
    assert not_held(question, bns, mentioning) == ["Bharatiya Nagarik Suraksha Sanhita"]
    # a section that is the named thing itself (a paragraph titled by its subject) holds it
    assert (
        not_held("When was the Treaty of Varna signed?", ["wiki.jsonl"], ["Treaty of Varna"]) == []
    )


def test_named_documents_keep_their_year() -> None:
    assert named_documents("Under the Consumer Protection Act, 2019, who is a consumer?") == [
        "Consumer Protection Act, 2019"
    ]


@pytest.mark.parametrize("mode", ["react", "guided"])
def test_both_modes_decline_a_question_about_another_act(tmp_path, mode: str) -> None:
    service = make_service(tmp_path)  # one document: "Test Act"
    response = service.execute_agentic_search(
        "What is the punishment for murder under the Indian Penal Code?", "test", mode=mode
    )
    assert response.status == "insufficient_context"
    assert response.answer.citations == []
    assert response.answer.answer_text == (
        "Insufficient context: this collection does not hold Indian Penal Code; it holds Test Act."
    )
    assert (
        response.trace["answer_replaced"]
        == "the question names a document the collection does not hold"
    )
    # the same question about the act it holds is answered
    held = service.execute_agentic_search(
        "What is the punishment for murder under the Test Act?", "test", mode=mode
    )
    assert held.status == "completed" and held.answer.citations


@pytest.mark.parametrize(
    ("question", "codes"),
    [
        ("Which record contains the marker bravotok9x?", ["bravotok9x"]),
        ("Was invoice INV-2024-0042 paid?", ["INV-2024-0042"]),
        ("What does BNS_S103 say?", ["BNS_S103"]),
        ("Is 100mg of codeine a lot? What about B-52 or H1N1?", []),  # units, short names
        ("What is the punishment for theft in 2023?", []),
    ],
)
def test_identifiers_are_letter_led_codes_with_a_digit(question: str, codes: list[str]) -> None:
    from sleuth.agents.scope import identifiers

    assert identifiers(question) == codes


def test_an_identifier_no_retrieved_section_mentions_is_declined_not_near_missed(
    tmp_path,
) -> None:
    from sleuth.agents.scope import unseen_identifiers

    evidence = ["REC_S1 Record 17 contains the marker bravotok1x and was filed in March."]
    assert unseen_identifiers("Which record holds bravotok9x?", evidence) == ["bravotok9x"]
    assert unseen_identifiers("Which record holds BRAVOTOK1X?", evidence) == []
    sections = {"REC_S1": ("Record 17.", evidence[0].removeprefix("REC_S1 "))}
    service = make_service(tmp_path, sections=sections)
    for mode in ("guided", "react"):
        near = service.execute_agentic_search(
            "Which record contains the marker bravotok9x?", "test", mode=mode
        )
        assert near.answer.is_insufficient_context, mode
        assert "bravotok9x" in near.answer.answer_text and not near.answer.citations
        held = service.execute_agentic_search(
            "Which record contains the marker bravotok1x?", "test", mode=mode
        )
        assert not held.answer.is_insufficient_context, mode
        assert [c.source_id for c in held.answer.citations] == ["REC_S1"]
