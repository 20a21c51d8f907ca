"""Evaluation datasets: the generic JSONL format, its errors, and the two shared sets."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sleuth.errors import UserError
from sleuth.eval.datasets import data_root, load_dataset, load_jsonl

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_generic_jsonl_reads_every_field(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "qa.jsonl",
        json.dumps({"id": "a", "question": " Q1? ", "answers": "yes", "gold_source_ids": ["X"]}),
        "",
        json.dumps({"question": "Q2?", "answers": ["b", " "], "type": "bridge", "extra": 1}),
    )
    ds = load_jsonl(path, corpus=[tmp_path])
    assert ds.name == "qa" and ds.corpus == (tmp_path.resolve(),)
    # one collection per questions file: a same-named file elsewhere gets another
    assert re.fullmatch(r"eval_qa_[0-9a-f]{8}", ds.collection)
    (tmp_path / "other").mkdir()
    twin = write_lines(tmp_path / "other" / "qa.jsonl", json.dumps({"question": "Q?"}))
    assert load_jsonl(twin).collection != ds.collection
    first, second = ds.questions
    assert (first.id, first.question, first.answers, first.gold_source_ids) == (
        "a",
        "Q1?",
        ("yes",),
        ("X",),
    )
    assert (second.id, second.answers, second.gold_source_ids, second.type) == (
        "3",  # the line number
        ("b",),
        (),
        "bridge",
    )


def test_a_folder_brings_its_corpus(tmp_path: Path) -> None:
    (tmp_path / "mine" / "corpus").mkdir(parents=True)
    write_lines(tmp_path / "mine" / "questions.jsonl", json.dumps({"question": "Q?"}))
    ds = load_dataset(str(tmp_path / "mine"))
    assert ds.name == "mine" and ds.corpus == ((tmp_path / "mine" / "corpus").resolve(),)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", "qa.jsonl:2: not valid JSON"),
        ("[1, 2]", "qa.jsonl:2: expected a JSON object"),
        ('{"answers": ["x"]}', "qa.jsonl:2: field 'question' must be a non-empty string"),
        ('{"question": "  "}', "qa.jsonl:2: field 'question' must be a non-empty string"),
        ('{"question": "Q", "answers": [1]}', "qa.jsonl:2: field 'answers' must be a list"),
        ('{"question": "Q", "gold_source_ids": 3}', "field 'gold_source_ids' must be a list"),
        ('{"question": "Q", "id": "q1"}', "qa.jsonl:2: id 'q1' appears twice"),
        ('{"question": "Q", "id": true}', "qa.jsonl:2: field 'id' must be a string"),
        ('{"question": "Q", "type": 7}', "qa.jsonl:2: field 'type' must be a string"),
        ('{"question": "' + "x" * 4001 + '"}', "qa.jsonl:2: field 'question' is 4,001 char"),
        ('{"question": "Q", ', "qa.jsonl:2: not valid JSON (Expecting property name"),
    ],
)
def test_bad_lines_name_file_line_and_field(tmp_path: Path, line: str, expected: str) -> None:
    path = write_lines(tmp_path / "qa.jsonl", json.dumps({"id": "q1", "question": "Q?"}), line)
    with pytest.raises(UserError) as info:
        load_jsonl(path)
    assert expected in str(info.value)


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"question": "Q?"}).encode())
    assert load_jsonl(path).questions[0].question == "Q?"


def test_missing_or_empty_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"unknown dataset 'nope\.jsonl'"):
        load_dataset("nope.jsonl")
    with pytest.raises(UserError, match="no questions"):
        load_jsonl(write_lines(tmp_path / "empty.jsonl", "", ""))
    with pytest.raises(UserError, match="no such corpus file or folder"):
        load_jsonl(write_lines(tmp_path / "q.jsonl", '{"question": "Q"}'), [tmp_path / "x"])
    with pytest.raises(UserError, match="--corpus is for your own dataset"):
        load_dataset("hotpotqa", tmp_path, [tmp_path])


def test_data_root_names_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=str(tmp_path)) as info:
        data_root(tmp_path)
    assert "--data-root" in str(info.value)


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is not next to the repository")
def test_hotpotqa_questions_map_to_the_loaders_source_ids() -> None:
    ds = load_dataset("hotpotqa", SHARED)
    assert len(ds.questions) == 100 and ds.collection == "eval_hotpotqa"
    first = ds.questions[0]
    assert first.question == "If Gallu is a demon Lilu is what?"
    assert first.answers == ("a spirit",) and first.type == "bridge"
    assert first.gold_source_ids == ("Alu", "Lilu_mythology")
    assert all(len(q.gold_source_ids) == 2 for q in ds.questions)


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is not next to the repository")
def test_statute_questions_have_one_section_id_each() -> None:
    ds = load_dataset("statutes", SHARED)
    assert len(ds.questions) == 996 and len(ds.corpus) == 4
    assert ds.questions[0].gold_source_ids == ("BNSS_S1",)
    assert ds.questions[0].answers[0].startswith("Under Section 1 of the")


def test_musique_loader_reads_hops_aliases_and_gold_ids(tmp_path):
    import json

    from sleuth.eval.datasets import load_dataset

    folder = tmp_path / "musique"
    folder.mkdir()
    (folder / "musique_corpus.json").write_text(
        json.dumps(
            [
                {"id": "mq0000", "title": "Tarn River", "text": "A river in Ostland."},
                {"id": "mq0001", "title": "Ostland", "text": "Home of Lake Veyra."},
            ]
        )
    )
    (folder / "musique_dev.json").write_text(
        json.dumps(
            [
                {
                    "id": "2hop__1_2",
                    "question": "Which lake is in the country of the Tarn River?",
                    "answer": "Lake Veyra",
                    "answer_aliases": ["Veyra Water"],
                    "gold_source_ids": ["mq0000", "mq0001"],
                }
            ]
        )
    )
    dataset = load_dataset("musique", tmp_path)
    (q,) = dataset.questions
    assert (q.type, q.answers, q.gold_source_ids) == (
        "2hop",
        ("Lake Veyra", "Veyra Water"),
        ("mq0000", "mq0001"),
    )
    assert dataset.corpus == (folder / "musique_corpus.json",)
