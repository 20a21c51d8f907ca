"""One question analysis per run (sleuth.agents.profile): the typed profile and its reuse.

Every question here is written for the test; none comes from a benchmark set.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sleuth.agents import profile as profile_module
from sleuth.agents.profile import QuestionProfile, analyse_question, profile_of
from sleuth.tools.base import RunContext
from tests.helpers import make_service


def test_a_plain_question_is_one_part_of_its_kind() -> None:
    p = analyse_question("What is the fine for parking on a pavement?")
    assert p.parts == () and not p.multi_part
    assert p.answer_kind == "fact"
    assert p.named_documents == () and p.references == ()
    assert p.hop is None


def test_a_preamble_of_statements_is_context_not_a_part() -> None:
    p = analyse_question(
        "My neighbour's dog bit my son and the owner refuses to pay. Can I claim damages?"
    )
    assert p.asked == "Can I claim damages?"
    assert p.answer_kind == "yes_no"
    assert not p.multi_part


def test_two_questions_in_one_are_two_parts() -> None:
    p = analyse_question("How long is the notice period? Who pays the deposit back?")
    assert p.multi_part
    assert p.parts == ("How long is the notice period?", "Who pays the deposit back?")


def test_a_named_document_and_a_section_reference_are_read() -> None:
    p = analyse_question("What does section 12 of the Tenancy Reform Act, 2031 say about pets?")
    assert p.named_documents == ("Tenancy Reform Act, 2031",)
    assert p.references == ("section 12 of the Tenancy Reform Act, 2031",)


def test_a_compositional_question_carries_its_first_hop() -> None:
    p = analyse_question("Where was the architect of the Glasshouse Pavilion educated?")
    assert p.hop == "What is the name of the architect of the Glasshouse Pavilion?"
    q = analyse_question("What river flows through the birthplace of Marta Kowalczyk?")
    assert q.hop == "What is the name of the birthplace of Marta Kowalczyk?"


def test_the_profile_is_json_for_the_trace() -> None:
    data = analyse_question("List the duties of a harbour master.").to_dict()
    assert data["answer_kind"] == "list"
    assert data["multi_part"] is False and data["parts"] == []


def _counting(real: Callable[[str], QuestionProfile], calls: list[str]):
    """``real``, recording each question it is asked to analyse in ``calls``."""

    def counting(question: str) -> QuestionProfile:
        calls.append(question)
        return real(question)

    return counting


def test_the_runs_profile_is_reused_and_a_sub_question_is_read_anew(monkeypatch) -> None:
    ctx = RunContext(collection="c")
    ctx.profile = analyse_question("Is a verbal lease binding?")
    calls: list[str] = []
    monkeypatch.setattr(
        profile_module, "analyse_question", _counting(profile_module.analyse_question, calls)
    )
    assert profile_of("Is a verbal lease binding?", ctx) is ctx.profile
    assert calls == []
    other = profile_of("What is a lease?", ctx)
    assert other.question == "What is a lease?" and calls == ["What is a lease?"]
    assert profile_of("Is a verbal lease binding?") is not ctx.profile  # no run: read anew


@pytest.mark.parametrize("mode", ["react", "guided"])
def test_each_run_reads_its_question_once_and_traces_the_profile(
    tmp_path, monkeypatch, mode
) -> None:
    import sleuth.service as service_module

    calls: list[str] = []
    monkeypatch.setattr(
        service_module, "analyse_question", _counting(service_module.analyse_question, calls)
    )
    monkeypatch.setattr(
        profile_module,
        "analyse_question",
        lambda q: pytest.fail(f"the run's question was analysed again: {q!r}"),
    )
    service = make_service(tmp_path)
    response = service.execute_agentic_search(
        "  What is the punishment for murder?  ", "test", mode=mode
    )
    assert calls == ["What is the punishment for murder?"]
    assert response.trace["question_profile"]["answer_kind"] == "fact"
    assert response.trace["question_profile"]["multi_part"] is False
