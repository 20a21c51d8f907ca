"""The evidence check of yes/no comparison answers (both / also / same)."""

from __future__ import annotations

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.comparison import check_yes_no, named_entities
from sleuth.agents.finish import finish_answer
from sleuth.tools.base import RunContext
from sleuth.types import Chunk

SECTIONS = {
    "Harrow_Lake": (
        "Harrow Lake",
        "Harrow Lake is a freshwater lake in northern Ostmark province.",
    ),
    "Vell_Reservoir": (
        "Vell Reservoir",
        "The Vell Reservoir is an artificial lake in southern Westmark province.",
    ),
    "Tarn_Pool": ("Tarn Pool", "Tarn Pool is a freshwater lake in the province of Ostmark."),
    "Mira_Quell": (
        "Mira Quell (painter)",
        "Mira Quell (born 1950) is a Danish painter and sculptor.",
    ),
    "Oskar_Lind": ("Oskar Lind", "Oskar Lind (1901-1977) was a Swedish-born painter."),
    "Ada_Rune": ("Ada Rune", "Ada Rune is a Danish painter known for seascapes."),
    "Lio_Marsh": ("Lio Marsh", "Lio Marsh is the singer of the Welsh folk group Brightwater."),
    "Tam_Okafor": ("Tam Okafor", "Tam Okafor is a drummer in the band Copperline."),
}


def _ctx(*sids: str) -> RunContext:
    ctx = RunContext(collection="test")
    ctx.track(
        [
            Chunk(
                chunk_id=f"{sid}#0",
                source_id=sid,
                doc_id="wiki",
                title_path=["wiki", SECTIONS[sid][0]],
                text=SECTIONS[sid][1],
                position=0,
            )
            for sid in sids
        ]
    )
    return ctx


def test_entities_are_the_sections_whose_titles_the_question_names_in_order() -> None:
    ctx = _ctx("Oskar_Lind", "Mira_Quell", "Harrow_Lake")
    entities = named_entities("Are Mira Quell and Oskar Lind both Danish painters?", ctx)
    assert [e.source_id for e in entities] == ["Mira_Quell", "Oskar_Lind"]


def test_both_differs_when_one_section_lacks_the_property() -> None:
    check = check_yes_no(
        "Are Mira Quell and Oskar Lind both Danish painters?", _ctx("Mira_Quell", "Oskar_Lind")
    )
    assert check is not None and check.verdict == "no"
    assert "Oskar_Lind" in check.reason


def test_both_holds_when_every_section_states_the_property() -> None:
    check = check_yes_no(
        "Were Mira Quell and Ada Rune both Danish painters?", _ctx("Mira_Quell", "Ada_Rune")
    )
    assert check is not None and check.verdict == "yes"


def test_same_compares_the_name_before_or_after_the_noun() -> None:
    lakes = "Are Harrow Lake and {} in the same province?"
    differ = check_yes_no(lakes.format("Vell Reservoir"), _ctx("Harrow_Lake", "Vell_Reservoir"))
    assert differ is not None and differ.verdict == "no"
    assert "ostmark" in differ.reason and "westmark" in differ.reason
    same = check_yes_no(lakes.format("Tarn Pool"), _ctx("Harrow_Lake", "Tarn_Pool"))
    assert same is not None and same.verdict == "yes"


def test_same_reads_only_the_noun_the_question_uses() -> None:
    # Tam Okafor's section names his band; Lio Marsh's says "group", not "band": no synonym
    # list decides that a group is a band, so no verdict is read
    check = check_yes_no(
        "Are Lio Marsh and Tam Okafor members of the same band?", _ctx("Lio_Marsh", "Tam_Okafor")
    )
    assert check is None
    check = check_yes_no(
        "Are Lio Marsh and Tam Okafor members of the same group?", _ctx("Lio_Marsh", "Tam_Okafor")
    )
    assert check is None  # nor that a band is a group


def test_no_verdict_without_two_named_entities_or_plain_evidence() -> None:
    assert check_yes_no("Is Harrow Lake a lake?", _ctx("Harrow_Lake")) is None
    # neither section names a country: "same country" cannot be read
    assert (
        check_yes_no(
            "Are Harrow Lake and Vell Reservoir in the same country?",
            _ctx("Harrow_Lake", "Vell_Reservoir"),
        )
        is None
    )


def test_a_models_yes_is_overturned_by_plain_evidence_and_traced() -> None:
    ctx = _ctx("Mira_Quell", "Oskar_Lind")
    draft = AnswerDraft(
        answer_text="Yes. Mira Quell is a Danish painter [1]. Oskar Lind was a painter [2].",
        short_answer="Yes",
    )
    done = finish_answer(
        "Mira Quell is a painter. Is Oskar Lind also a Danish painter?",
        draft,
        ctx,
        from_model=True,
    )
    assert done.answer.short_answer == "No"
    assert done.answer.answer_text.startswith("No.")
    assert done.trace()["yes_no_check"].startswith("Yes overturned to no")


def test_a_models_yes_the_evidence_agrees_with_is_kept() -> None:
    ctx = _ctx("Mira_Quell", "Ada_Rune")
    draft = AnswerDraft(answer_text="Yes. Both are Danish painters [1] [2].", short_answer="Yes")
    done = finish_answer(
        "Are Mira Quell and Ada Rune both Danish painters?", draft, ctx, from_model=True
    )
    assert done.answer.short_answer == "Yes"
    assert done.trace()["yes_no_check"].startswith("confirmed yes")
