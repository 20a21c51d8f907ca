"""Tests of sleuth.ingest.records: JSON/JSONL records, templates, the statute profile."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from sleuth.errors import IngestError
from sleuth.ingest.loaders import load_file
from sleuth.ingest.records import (
    STATUTE_PROFILE,
    RecordOptions,
    abbreviate,
    is_statute,
    is_title_keyed,
    records_from_json,
    records_from_jsonl,
    render_template,
    title_source_id,
    title_source_ids,
)

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
STATUTES = DATA / "statutes"
HOTPOT_CORPUS = DATA / "hotpotqa" / "hotpotqa_train_corpus.json"


def _statute(sections: list[dict[str, object]], name: str = "The Bharatiya Nyaya Sanhita, 2023"):
    return json.dumps({"name": name, "year": "2023", "sections": sections})


@pytest.mark.parametrize(
    ("name", "abbr"),
    [
        ("The Bharatiya Nyaya Sanhita, 2023", "BNS"),
        ("The Bharatiya Nagarik Suraksha Sanhita, 2023", "BNSS"),
        ("The Bharatiya Sakshya Adhiniyam, 2023", "BSA"),
        ("The Consumer Protection Act, 2019", "CPA"),
        ("Code of Criminal Procedure, 1973", "CCP"),
        ("The Employees’ Provident Funds and Miscellaneous Provisions Act, 1952", "EPFMPA"),
        ("2023", ""),
    ],
)
def test_abbreviate(name: str, abbr: str) -> None:
    assert abbreviate(name) == abbr


def test_statute_shape_is_detected_and_gets_citation_ids() -> None:
    text = _statute(
        [
            {
                "section_number": "103",
                "title": "Punishment for murder.",
                "text": "(1) Whoever commits murder\r\nshall be punished.\r\n",
                "chapter": "",
            },
            {
                "section_number": "104",
                "title": "Punishment for murder by life-convict.",
                "text": "Whoever...",
                "chapter": "CHAPTER VI OF OFFENCES AFFECTING THE HUMAN BODY",
            },
        ]
    )
    assert is_statute(json.loads(text))
    result = records_from_json(text, "bns.json")
    assert result.doc_id == "BNS"
    assert result.title == "The Bharatiya Nyaya Sanhita, 2023"
    first, second = result.sections
    assert first.source_id == "BNS_S103"
    assert first.title_path == [
        "The Bharatiya Nyaya Sanhita, 2023",
        "Section 103. Punishment for murder.",
    ]
    assert first.text == "(1) Whoever commits murder\nshall be punished."
    assert first.metadata["section_number"] == "103"
    assert second.title_path == [
        "The Bharatiya Nyaya Sanhita, 2023",
        "CHAPTER VI OF OFFENCES AFFECTING THE HUMAN BODY",
        "Section 104. Punishment for murder by life-convict.",
    ]


def test_duplicate_source_ids_get_suffixes() -> None:
    text = _statute(
        [{"section_number": "5", "title": "A", "text": f"t{i}"} for i in range(3)],
        name="The Consumer Protection Act, 2019",
    )
    ids = [s.source_id for s in records_from_json(text, "cpa.json").sections]
    assert ids == ["CPA_S5", "CPA_S5_2", "CPA_S5_3"]


def test_statute_record_without_title_still_has_a_heading() -> None:
    text = _statute([{"section_number": "7", "text": "body"}])
    assert records_from_json(text, "x.json").sections[0].title_path[-1] == "Section 7"


def test_missing_text_field_names_record_and_field() -> None:
    text = _statute(
        [
            {"section_number": "1", "title": "A", "text": "ok"},
            {"section_number": "2", "title": "B", "text": "ok"},
            {"section_number": "3", "title": "C", "body": "no text here"},
        ]
    )
    with pytest.raises(IngestError) as info:
        records_from_json(text, "bad.json")
    assert info.value.path == "bad.json"
    assert "sections[2]" in info.value.reason
    assert "'text'" in info.value.reason


def test_non_text_value_is_an_error() -> None:
    with pytest.raises(IngestError, match=r"\$\[0\]: field 'text' is dict"):
        records_from_json('[{"text": {"a": 1}}]', "x.json")


def test_invalid_json_reports_line_and_column() -> None:
    with pytest.raises(IngestError, match="invalid JSON at line 3, column 5"):
        records_from_json('{\n  "a": 1,\n    oops\n}', "x.json")


def test_jsonl_records_and_bad_line() -> None:
    good = records_from_jsonl('{"text": "a", "title": "T1"}\n\n{"text": "b"}\n', "x.jsonl")
    assert [s.text for s in good.sections] == ["a", "b"]
    assert [s.title_path for s in good.sections] == [["T1"], ["Record 2"]]
    with pytest.raises(IngestError, match="invalid JSON on line 3"):
        records_from_jsonl('{"text": "a"}\n{"text": "b"}\n{"text": \n', "x.jsonl")
    with pytest.raises(IngestError, match="line 2: missing text field 'text'"):
        records_from_jsonl('{"text": "a"}\n{"body": "b"}\n', "x.jsonl")


def test_record_path_template_and_title_path_fields() -> None:
    data = {
        "meta": {"name": "The Example Rules, 2020"},
        "payload": {
            "items": [
                {"no": 1, "heading": "Scope", "part": "Part I", "body": "Applies."},
                {"no": 2, "heading": "Terms", "part": "", "body": "Means."},
            ]
        },
    }
    options = RecordOptions(
        record_path="payload.items",
        text_field="body",
        title_field="heading",
        source_id_template="{doc.kind|upper}_{no}",
        title_path_fields=["part"],
        doc_title_field=None,
    )
    with pytest.raises(IngestError, match=r"missing field 'doc\.kind'"):
        records_from_json(json.dumps(data), "r.json", options)
    data["kind"] = "er"
    result = records_from_json(json.dumps(data), "r.json", options)
    assert [s.source_id for s in result.sections] == ["ER_1", "ER_2"]
    assert [s.title_path for s in result.sections] == [["Part I", "Scope"], ["Terms"]]


def test_record_path_not_found() -> None:
    with pytest.raises(IngestError, match=r"record_path 'a\.b': 'b' not found"):
        records_from_json('{"a": {"c": []}}', "x.json", RecordOptions(record_path="a.b"))


def test_auto_detection_of_generic_records() -> None:
    result = records_from_json('{"items": [{"id": "k1", "content": "hello"}]}', "x.json")
    assert result.sections[0].source_id == "k1"
    assert result.sections[0].text == "hello"
    with pytest.raises(IngestError) as info:
        records_from_json('[{"question": "no text field"}]', "x.json")
    # a CLI user cannot pass RecordOptions(...): the flag is named, with the field
    assert "use --text-field (RecordOptions.text_field)" in info.value.reason
    assert "RecordOptions(" not in info.value.reason


def test_error_messages_name_the_cli_flag_and_the_option() -> None:
    with pytest.raises(IngestError) as info:
        records_from_json('{"stuff": {"a": 1}}', "x.json")
    assert "use --record-path (RecordOptions.record_path)" in info.value.reason
    assert "RecordOptions(" not in info.value.reason
    with pytest.raises(IngestError) as info:
        records_from_json('[{"body": "x"}]', "x.json", RecordOptions(text_field="question"))
    assert "missing text field 'question'" in info.value.reason
    assert "--text-field (RecordOptions.text_field)" in info.value.reason
    with pytest.raises(IngestError) as info:
        records_from_json(
            '[{"text": "x"}]', "x.json", RecordOptions(source_id_template="Q_{faq_id}")
        )
    assert "missing field 'faq_id'" in info.value.reason
    assert "--source-id-template (RecordOptions.source_id_template)" in info.value.reason


def test_record_set_carries_the_effective_options() -> None:
    assert records_from_json(
        _statute([{"section_number": "1", "text": "x"}]), "x.json"
    ).options == (STATUTE_PROFILE)
    detected = records_from_json('{"items": [{"id": "k1", "content": "hello"}]}', "x.json")
    assert detected.options == RecordOptions(
        record_path="items", text_field="content", title_field=None, id_field="id"
    )
    given = RecordOptions(text_field="q")
    assert records_from_json('[{"q": "x"}]', "x.json", given).options == given
    assert records_from_jsonl('{"q": "x"}\n', "x.jsonl", given).options == given


def test_render_template_filters() -> None:
    record = {"n": 9, "t": "Hello World"}
    doc = {"name": "The Bharatiya Sakshya Adhiniyam, 2023"}
    assert render_template("{doc.name|abbr}_S{n}-{t|slug}", record, doc) == "BSA_S9-hello_world"
    with pytest.raises(KeyError):
        render_template("{missing}", record, doc)
    with pytest.raises(ValueError, match="unknown template filter"):
        render_template("{t|nope}", record, doc)


def test_record_options_reject_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        RecordOptions(text_feild="text")  # type: ignore[call-arg]
    assert STATUTE_PROFILE.source_id_template == "{doc.name|abbr}_S{section_number}"


@pytest.mark.skipif(not STATUTES.is_dir(), reason="shared statute data missing")
def test_real_statute_records() -> None:
    path = STATUTES / "the_bharatiya_sakshya_adhiniyam_2023.json"
    raw = path.read_text(encoding="utf-8")
    assert "\\r\\n" in raw  # the data has (escaped) Windows line breaks ...
    result = records_from_json(raw, str(path))
    assert len(result.sections) == 170
    s63 = next(s for s in result.sections if s.source_id == "BSA_S63")
    assert s63.title_path[0] == "The Bharatiya Sakshya Adhiniyam, 2023"
    assert s63.title_path[-1].startswith("Section 63. ")
    assert all("\r" not in s.text for s in result.sections)  # ... which are normalised
    assert result.metadata["act_id"]


@pytest.mark.parametrize(
    ("title", "source_id"),
    [
        ("Arthur's Magazine", "Arthurs_Magazine"),
        ("Rush 2: Extreme Racing USA", "Rush_2_Extreme_Racing_USA"),
        ("Harris, Forbes &amp; Co.", "Harris_Forbes_Co"),
        ("Alû", "Alu"),
        ("Ælfgar, Earl of Mercia", "AElfgar_Earl_of_Mercia"),
        ("Asbjørn Ruud", "Asbjorn_Ruud"),
        (
            "List of North Carolina hurricanes (1980–99)",
            "List_of_North_Carolina_hurricanes_1980_99",
        ),
        ("I Am a Good Person/I Am a Bad Person", "I_Am_a_Good_Person_I_Am_a_Bad_Person"),
        ("St. Louis", "St._Louis"),
    ],
)
def test_title_source_id(title: str, source_id: str) -> None:
    assert title_source_id(title) == source_id


def test_title_source_id_is_marker_safe_and_never_empty() -> None:
    for title in ["මහ සෝනා", "???", "", "  'quoted'  ", "a#b:c[d]e"]:
        sid = title_source_id(title)
        assert re.fullmatch(r"[A-Za-z0-9_.-]+", sid), sid
        assert sid == title_source_id(title)  # deterministic
    assert title_source_id("මහ සෝනා").startswith("title_")
    assert title_source_id("මහ") != title_source_id("සෝනා")
    assert title_source_ids(["A B", "A&B", "A_B", "C"]) == {
        "A B": "A_B",
        "A&B": "A_B_2",
        "A_B": "A_B_3",
        "C": "C",
    }


def _title_keyed_file(tmp_path: Path) -> Path:
    data = {
        "Arthur's Magazine": [
            "Arthur's Magazine (1844–1846) was a literary  periodical.",
            " It was published in Philadelphia.",
            "",
        ],
        "Empty": [],
        "Blank": ["  "],
        "Arthurs Magazine": "A second magazine\r\nwith a plain string value.",
        "Nothing": None,
        "First for Women": [" First for Women is a woman's magazine."],
    }
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_title_keyed_object_gives_one_section_per_title(tmp_path: Path) -> None:
    path = _title_keyed_file(tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert is_title_keyed(data)
    result = records_from_json(path.read_text(encoding="utf-8"), str(path))
    assert result.options is None
    assert [s.source_id for s in result.sections] == [
        "Arthurs_Magazine",
        "Arthurs_Magazine_2",  # the collision, in file order
        "First_for_Women",
    ]
    assert [s.title_path for s in result.sections] == [
        ["Arthur's Magazine"],
        ["Arthurs Magazine"],
        ["First for Women"],
    ]
    first, second, third = result.sections
    # sentences stripped and joined with single spaces; inner spacing kept
    assert first.text == (
        "Arthur's Magazine (1844–1846) was a literary  periodical. "
        "It was published in Philadelphia."
    )
    assert second.text == "A second magazine\nwith a plain string value."
    assert third.text == "First for Women is a woman's magazine."
    assert first.metadata["title"] == "Arthur's Magazine"
    # the ids benches compute from the keys are the loader's ids
    ids = title_source_ids(data)
    assert {s.title_path[-1]: s.source_id for s in result.sections} == {
        t: ids[t] for t in ("Arthur's Magazine", "Arthurs Magazine", "First for Women")
    }

    doc = load_file(path)
    assert doc.doc_id == "corpus"
    assert doc.sections[0].title_path == ["corpus", "Arthur's Magazine"]
    assert doc.sections[2].source_id == "First_for_Women"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"Good": ["x."], "Bad": 3}, r'corpus\.json: entry "Bad": value is a number, not text'),
        ({"Good": ["x."], "Bad": {"a": "b"}}, r'entry "Bad": value is an object, not text'),
        ({"Good": "x.", "Bad": ["ok", 7]}, r'entry "Bad": item 1 is a number, not a string'),
    ],
)
def test_title_keyed_value_of_wrong_type_is_an_error(
    tmp_path: Path, data: dict[str, object], message: str
) -> None:
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(IngestError, match=message):
        records_from_json(path.read_text(encoding="utf-8"), str(path))
    with pytest.raises(IngestError, match=message):
        load_file(path)


def test_title_keyed_detection_leaves_other_shapes_alone() -> None:
    assert not is_title_keyed({})
    assert not is_title_keyed([["a"]])
    assert not is_title_keyed({"title": "One record", "text": "its text"})
    assert not is_title_keyed({"name": "x", "items": [{"text": "a record"}]})
    assert not is_title_keyed({"stuff": {"a": 1}, "more": 2})
    assert is_title_keyed({"A": "text", "B": 3})  # then an error naming "B"
    assert not is_title_keyed(json.loads(_statute([{"section_number": "1", "text": "x"}])))
    # a one-record object still fails as before, asking for the record list
    with pytest.raises(IngestError, match="no records found"):
        records_from_json('{"title": "One record", "text": "its text"}', "x.json")


@pytest.mark.skipif(not HOTPOT_CORPUS.is_file(), reason="shared HotpotQA data missing")
def test_real_hotpotqa_corpus() -> None:
    raw = HOTPOT_CORPUS.read_text(encoding="utf-8")
    data = json.loads(raw)
    result = records_from_json(raw, str(HOTPOT_CORPUS))
    assert len(result.sections) == len(data) == 994
    ids = [s.source_id for s in result.sections]
    assert len(set(ids)) == 994
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+", sid) for sid in ids if sid)
    assert ids == list(title_source_ids(data).values())
    assert all("  " not in s.text[:2] and not s.text.startswith(" ") for s in result.sections)
