"""The shared Unicode analyzer (issue 12 §2): folding, any script, CJK bigrams, emoji."""

from __future__ import annotations

import pytest

from sleuth.retrieval.text import analyze, coverage, latin_share, named_phrases, terms, words
from sleuth.store.local_index import tokenize


def test_accents_fold_both_ways() -> None:
    assert terms("Aschenbrödel") == terms("Aschenbrodel") == ["aschenbrodel"]
    assert tokenize("Café résumé naïve") == tokenize("Cafe resume naive")
    assert analyze("Straße Øresund ﬁnancial") == ["strass", "oresund", "financi"]


def test_words_of_any_script_stay_whole() -> None:
    assert terms("Москва — столица России") == ["москва", "столица", "россии"]
    assert terms("हिन्दी भाषा") == ["हिन्दी", "भाषा"]  # vowel signs do not split words
    assert terms("مُحَمَّد") == terms("محمد")  # Arabic short vowels are optional


def test_cjk_runs_become_overlapping_bigrams() -> None:
    assert terms("東京都") == ["東京", "京都"]
    assert terms("書") == ["書"]
    assert terms("서울은 한국의") == ["서울", "울은", "한국", "국의"]
    assert tokenize("2024年の東京abc") == ["2024", "年の", "の東", "東京", "abc"]
    assert tokenize("ｶﾀｶﾅ") == ["カタ", "タカ", "カナ"]  # half-width kana normalised
    assert words("東京都に住む") == ["東京都に住む"]


def test_emoji_are_one_token_each() -> None:
    assert tokenize("I 🍕 👍🏽 👨‍👩‍👧 🇯🇵 ❤️") == ["i", "🍕", "👍", "👨‍👩‍👧", "🇯🇵", "❤"]
    assert coverage(set(terms("🍕?")), "Pizza 🍕 tonight") == 1.0


@pytest.mark.parametrize(
    "text",
    [
        "The murdered persons of the State",
        "Whoever commits theft shall be punished; punishment is a fine.",
        "self-defence offender's rights_of_way (2) Section 5(a)",
    ],
)
def test_plain_english_is_analysed_as_before(text: str) -> None:
    """The non-ASCII path gives the same terms for the ASCII words (no English regression)."""
    assert analyze(text + " café")[:-1] == analyze(text)
    assert terms(text + " café")[:-1] == terms(text)
    assert "punish" in terms("punished") and terms("punished") == terms("punishment")
    assert tokenize("The murdered persons of the State") == ["murder", "person", "state"]
    assert terms("self-defence") == ["self-def"]  # inner hyphens kept for terms


def test_question_words_are_dropped_from_terms_only() -> None:
    assert terms("What does the law say about theft?") == ["theft"]
    assert "what" in tokenize("What is theft?")


def test_latin_share() -> None:
    assert latin_share("Theft is a crime") == 1.0
    assert latin_share("यह झूठ है") == 0.0
    assert latin_share("1998") is None


def test_a_word_after_a_list_items_label_opens_a_sentence_not_a_name() -> None:
    # a statute's sub-section "(1) Whoever …": "Whoever" is no name to search a hop for
    text = (
        "(1) Whoever threatens another shall be punished. "
        "(b) Any Chief Judicial Magistrate may act."
    )
    names = [name for _, name in named_phrases(text)]
    assert "Whoever" not in names
    assert any("Chief Judicial Magistrate" in name for name in names)
    # a name after a label is still a name, and a capitalised word mid-sentence still counts
    assert [n for _, n in named_phrases("(2) Piers Lorne sailed to Brevania.")] == [
        "Piers Lorne",
        "Brevania",
    ]
