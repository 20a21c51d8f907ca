"""Evaluation datasets: questions with gold answers and gold source ids, plus their corpus.

Three sources:

- ``hotpotqa``: ``hotpotqa/hotpotqa_train.json`` (questions, ``answer``, ``supporting_facts``)
  over ``hotpotqa/hotpotqa_train_corpus.json`` (one JSON object ``{title: [sentences]}``);
  gold ids = the supporting titles, mapped by :func:`sleuth.ingest.records.title_source_ids`
  (the ids the loader gives the paragraphs).
- ``statutes``: ``statutes/synthetic_qa.json`` (``instruction``, ``output``, ``source_act``,
  ``source_section``) over the four acts in ``statutes/``; gold id =
  ``abbreviate(source_act) + "_S" + source_section`` (e.g. ``BNS_S103``).
- ``musique``: ``musique/musique_dev.json`` (``question``, ``answer``, ``answer_aliases``,
  ``gold_source_ids`` in hop order) over ``musique/musique_corpus.json`` (records
  ``{"id", "title", "text"}``: the id, ``mq0000`` …, is each paragraph's citation id);
  the type is the hop type of the id's prefix (``2hop``, ``3hop1`` …).
- a path, in the generic format (README, "Evaluate on your own data"): a JSONL file of
  questions, one JSON object per line::

      {"id": "q1", "question": "…", "answers": ["…"], "gold_source_ids": ["BNS_S103"]}

  ``question`` is required (at most 4,000 characters); ``answers`` (a list of strings, or
  one string),
  ``gold_source_ids`` (a list of strings), ``id`` (default: the line number) and ``type``
  (a label to group results by) are optional. A *judged* set adds ``key_facts`` (a list of
  facts, each a list of alternative phrasings, any one of which counts), ``verdict``
  (``"yes"`` / ``"no"`` for a yes/no question) and ``kind`` (``"out_of_scope"`` for a
  question the corpus does not answer, which should be declined). The corpus to ingest is given with
  ``--corpus`` (files or folders), or, when the path is a folder, is that folder's
  ``corpus/`` next to its ``questions.jsonl``.

Every set splits into ``dev`` and ``test`` by a hash of each question's id
(:func:`split_of`): rules, prompts and thresholds are chosen on ``dev``, numbers are
reported on ``test``.

The built-in sets are read in place from a data root (``--data-root``, ``SLEUTH_EVAL_DATA``,
or ``shared/data`` / ``../shared/data`` under the current directory); nothing is copied.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sleuth.errors import UserError
from sleuth.types import MAX_QUESTION_CHARS

BUILTIN = ("hotpotqa", "statutes", "musique")
STATUTE_ACTS = (
    "the_bharatiya_nyaya_sanhita_2023.json",
    "the_bharatiya_nagarik_suraksha_sanhita_2023.json",
    "the_bharatiya_sakshya_adhiniyam_2023.json",
    "the_consumer_protection_act_2019.json",
)
QUESTIONS_FILE = "questions.jsonl"
SPLITS = ("dev", "test", "all")
Split = Literal["dev", "test", "all"]
VERDICTS = ("yes", "no")
CORPUS_DIR = "corpus"


@dataclass(frozen=True)
class EvalQuestion:
    """One question to evaluate.

    Attributes:
        id: unique within the dataset.
        question: the question text.
        answers: gold answers (any one counts); empty when only retrieval is judged.
        gold_source_ids: the source ids that hold the answer; empty when unknown.
        type: a label to group results by (HotpotQA: ``bridge`` / ``comparison``).
        key_facts: facts a correct answer states, each a tuple of alternative phrasings
            (any one counts); empty when the set is not judged.
        verdict: ``"yes"`` or ``"no"`` for a yes/no question of a judged set, else ``None``.
        out_of_scope: the corpus does not answer the question: it should be declined.
    """

    id: str
    question: str
    answers: tuple[str, ...] = ()
    gold_source_ids: tuple[str, ...] = ()
    type: str = ""
    key_facts: tuple[tuple[str, ...], ...] = ()
    verdict: str | None = None
    out_of_scope: bool = False

    @property
    def split(self) -> Literal["dev", "test"]:
        """This question's split (:func:`split_of` of its id)."""
        return split_of(self.id)


def split_of(question_id: str) -> Literal["dev", "test"]:
    """The fixed split of a question: ``test`` when the first byte of the SHA-256 of its id
    (UTF-8) is odd, else ``dev`` — about half each, stable across runs, machines and
    question order, and independent of the question's text."""
    return "test" if hashlib.sha256(question_id.encode("utf-8")).digest()[0] & 1 else "dev"


def in_split(questions: Sequence[EvalQuestion], split: str) -> list[EvalQuestion]:
    """The questions of ``split`` (``dev``, ``test`` or ``all``), in their order.

    Raises:
        UserError: an unknown split name.
    """
    if split not in SPLITS:
        raise UserError(f"unknown split '{split}': use dev, test or all")
    return [q for q in questions if split == "all" or q.split == split]


@dataclass(frozen=True)
class EvalDataset:
    """Questions plus the corpus files their gold ids refer to.

    Attributes:
        name: ``hotpotqa``, ``statutes``, or the file's stem.
        questions: in file order.
        corpus: files or folders to ingest before the runs (empty: use the collection as is).
        collection: the collection the corpus goes into and the runs search.
        source: the questions file, for the report.
    """

    name: str
    questions: tuple[EvalQuestion, ...]
    corpus: tuple[Path, ...] = ()
    collection: str = ""
    source: str = ""


def data_root(given: Path | None = None) -> Path:
    """The folder holding ``hotpotqa/``, ``statutes/`` or ``musique/``.

    Raises:
        UserError: none of the candidates exists (the message names them).
    """
    candidates: list[Path] = []
    if given is not None:
        candidates.append(Path(given))
    elif os.environ.get("SLEUTH_EVAL_DATA"):
        candidates.append(Path(os.environ["SLEUTH_EVAL_DATA"]))
    else:
        candidates += [Path.cwd() / "shared" / "data", Path.cwd().parent / "shared" / "data"]
    for path in candidates:
        if any((path / name).is_dir() for name in BUILTIN):
            return path.resolve()
    looked = ", ".join(str(p) for p in candidates)
    raise UserError(
        f"no evaluation data found (looked in {looked}); pass --data-root DIR, the folder "
        "holding hotpotqa/ and statutes/, or set SLEUTH_EVAL_DATA"
    )


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise UserError(f"missing data file: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from exc


def load_hotpotqa(root: Path) -> EvalDataset:
    """The 100 HotpotQA questions over their pooled 994-paragraph corpus.

    Raises:
        UserError: a file is missing or malformed, or a gold title is not in the corpus.
    """
    from sleuth.ingest.records import title_source_ids

    corpus_path = root / "hotpotqa" / "hotpotqa_train_corpus.json"
    questions_path = root / "hotpotqa" / "hotpotqa_train.json"
    corpus = _read_json(corpus_path)
    raw = _read_json(questions_path)
    if not isinstance(corpus, dict) or not isinstance(raw, list):
        raise UserError(f"{root / 'hotpotqa'}: unexpected layout (corpus object, question list)")
    ids = title_source_ids(corpus)
    questions = []
    for index, item in enumerate(raw):
        where = f"{questions_path}: question {index}"
        try:
            titles = list(dict.fromkeys(str(t) for t, _ in item["supporting_facts"]))
            text, answer = str(item["question"]), str(item.get("answer", ""))
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"{where}: missing or malformed field {exc}") from exc
        missing = [t for t in titles if t not in ids]
        if missing:
            raise UserError(f"{where}: supporting titles not in the corpus: {missing}")
        questions.append(
            EvalQuestion(
                id=str(item.get("_id", index)),
                question=text,
                answers=(answer,) if answer else (),
                gold_source_ids=tuple(ids[t] for t in titles),
                type=str(item.get("type", "")),
            )
        )
    return EvalDataset(
        name="hotpotqa",
        questions=tuple(questions),
        corpus=(corpus_path,),
        collection="eval_hotpotqa",
        source=str(questions_path),
    )


def load_statutes(root: Path) -> EvalDataset:
    """The 996 synthetic statute questions over the four acts (gold: one section each).

    Raises:
        UserError: a file is missing or malformed.
    """
    from sleuth.ingest.records import abbreviate

    folder = root / "statutes"
    questions_path = folder / "synthetic_qa.json"
    acts = tuple(folder / name for name in STATUTE_ACTS)
    for path in acts:
        if not path.is_file():
            raise UserError(f"missing data file: {path}")
    raw = _read_json(questions_path)
    if not isinstance(raw, list):
        raise UserError(f"{questions_path}: expected a JSON list of questions")
    questions = []
    for index, item in enumerate(raw):
        try:
            gold = f"{abbreviate(item['source_act'])}_S{item['source_section']}"
            text, output = str(item["instruction"]), str(item.get("output", ""))
        except (KeyError, TypeError) as exc:
            raise UserError(f"{questions_path}: question {index}: missing field {exc}") from exc
        questions.append(
            EvalQuestion(
                id=str(index),
                question=text,
                answers=(output,) if output else (),
                gold_source_ids=(gold,),
                type=abbreviate(item["source_act"]),
            )
        )
    return EvalDataset(
        name="statutes",
        questions=tuple(questions),
        corpus=acts,
        collection="eval_statutes",
        source=str(questions_path),
    )


def load_musique(root: Path) -> EvalDataset:
    """The MuSiQue development questions (2 to 4 hops) over their pooled paragraphs.

    Raises:
        UserError: a file is missing or malformed, or a gold id is not in the corpus.
    """
    folder = root / "musique"
    corpus_path = folder / "musique_corpus.json"
    questions_path = folder / "musique_dev.json"
    corpus = _read_json(corpus_path)
    raw = _read_json(questions_path)
    if not isinstance(corpus, list) or not isinstance(raw, list):
        raise UserError(f"{folder}: unexpected layout (a list of paragraphs, a list of questions)")
    ids = {str(p.get("id")) for p in corpus if isinstance(p, dict)}
    questions = []
    for index, item in enumerate(raw):
        where = f"{questions_path}: question {index}"
        try:
            gold = tuple(str(g) for g in item["gold_source_ids"])
            answers = (str(item["answer"]), *(str(a) for a in item.get("answer_aliases") or ()))
            qid, text = str(item["id"]), str(item["question"])
        except (KeyError, TypeError) as exc:
            raise UserError(f"{where}: missing or malformed field {exc}") from exc
        missing = [g for g in gold if g not in ids]
        if missing:
            raise UserError(f"{where}: gold ids not in the corpus: {missing}")
        questions.append(
            EvalQuestion(
                id=qid,
                question=text,
                answers=tuple(a for a in answers if a),
                gold_source_ids=gold,
                type=qid.split("__", 1)[0],
            )
        )
    return EvalDataset(
        name="musique",
        questions=tuple(questions),
        corpus=(corpus_path,),
        collection="eval_musique",
        source=str(questions_path),
    )


def _strings(value: Any, where: str, name: str) -> tuple[str, ...]:
    """A list of non-empty strings (one string is accepted as a list of one)."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: field '{name}' must be a list of strings")
    return tuple(v.strip() for v in value if v.strip())


def _key_facts(value: Any, where: str) -> tuple[tuple[str, ...], ...]:
    """``key_facts``: a list of facts, each a list of alternative phrasings (or one string)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise UserError(f"{where}: field 'key_facts' must be a list of lists of strings")
    facts = tuple(_strings(fact, where, "key_facts") for fact in value)
    if any(not fact for fact in facts):
        raise UserError(f"{where}: field 'key_facts' holds an empty fact")
    return facts


def load_jsonl(path: Path, corpus: Sequence[Path] = ()) -> EvalDataset:
    """A dataset in the generic JSONL format (module docstring).

    Args:
        path: a ``.jsonl`` file, or a folder with ``questions.jsonl`` and ``corpus/``.
        corpus: files or folders to ingest; default: the folder's ``corpus/`` if any.

    Raises:
        UserError: the file is missing, a line is not a JSON object, a field has the wrong
            type, ``question`` is missing, empty or too long, or an id repeats (the message
            names the file, the line and the field).
    """
    path = Path(path)
    folder_corpus: tuple[Path, ...] = ()
    if path.is_dir():
        if (path / CORPUS_DIR).is_dir():
            folder_corpus = ((path / CORPUS_DIR).resolve(),)
        path = path / QUESTIONS_FILE
    if not path.is_file():
        raise UserError(f"no such dataset file: {path}")
    for extra in corpus:
        if not Path(extra).exists():
            raise UserError(f"no such corpus file or folder: {extra}")
    questions: list[EvalQuestion] = []
    seen: set[str] = set()
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc})") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(item, dict):
            raise UserError(f"{where}: expected a JSON object with a 'question' field")
        question = item.get("question")
        if not isinstance(question, str) or not question.strip():
            raise UserError(f"{where}: field 'question' must be a non-empty string")
        if len(question.strip()) > MAX_QUESTION_CHARS:
            raise UserError(
                f"{where}: field 'question' is {len(question.strip()):,} characters long, at "
                f"most {MAX_QUESTION_CHARS:,}"
            )
        qid = item.get("id", str(number))
        if not isinstance(qid, str | int) or isinstance(qid, bool):
            raise UserError(f"{where}: field 'id' must be a string or an integer")
        qid = str(qid)
        if qid in seen:
            raise UserError(f"{where}: id '{qid}' appears twice")
        seen.add(qid)
        label = item.get("type", "")
        if not isinstance(label, str):
            raise UserError(f"{where}: field 'type' must be a string")
        verdict = item.get("verdict")
        if verdict is not None and verdict not in VERDICTS:
            raise UserError(f'{where}: field \'verdict\' must be "yes", "no" or null')
        kind = item.get("kind", "in_corpus")
        if kind not in ("in_corpus", "out_of_scope"):
            raise UserError(f'{where}: field \'kind\' must be "in_corpus" or "out_of_scope"')
        questions.append(
            EvalQuestion(
                id=qid,
                question=question.strip(),
                answers=_strings(item.get("answers"), where, "answers"),
                gold_source_ids=_strings(item.get("gold_source_ids"), where, "gold_source_ids"),
                type=label,
                key_facts=_key_facts(item.get("key_facts"), where),
                verdict=verdict,
                out_of_scope=kind == "out_of_scope",
            )
        )
    if not questions:
        raise UserError(f"{path}: no questions (one JSON object per line)")
    path = path.resolve()
    name = path.parent.name if path.name == QUESTIONS_FILE else path.stem
    # one collection per questions file: two files with the same name do not share one
    digest = hashlib.sha256(str(path).encode("utf-8")).hexdigest()[:8]
    slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:40]
    return EvalDataset(
        name=name,
        questions=tuple(questions),
        corpus=tuple(Path(c).resolve() for c in corpus) or folder_corpus,
        collection=f"eval_{slug}_{digest}",
        source=str(path),
    )


def load_dataset(
    dataset: str, root: Path | None = None, corpus: Sequence[Path] = ()
) -> EvalDataset:
    """``hotpotqa``, ``statutes``, ``musique`` or a path in the generic format.

    ``corpus`` replaces a built-in set's corpus only when given for a path dataset; for the
    built-in sets it is refused (their gold ids refer to their own corpus).

    Raises:
        UserError: see the loaders.
    """
    if dataset in BUILTIN:
        if corpus:
            raise UserError(f"--corpus is for your own dataset files, not '{dataset}'")
        folder = data_root(root)
        loaders = {"hotpotqa": load_hotpotqa, "statutes": load_statutes, "musique": load_musique}
        return loaders[dataset](folder)
    path = Path(dataset)
    if not path.exists():
        raise UserError(
            f"unknown dataset '{dataset}': use hotpotqa, statutes, or the path of a JSONL "
            "file (or a folder with questions.jsonl)"
        )
    return load_jsonl(path, corpus)
