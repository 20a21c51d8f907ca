"""``sleuth eval``: measure answer, retrieval, citation and agent-behaviour quality.

:mod:`sleuth.eval.datasets` loads questions (HotpotQA, the statutes, or the generic JSONL
format), :mod:`sleuth.eval.runner` runs and scores them, :mod:`sleuth.eval.metrics` holds
the metric definitions and :mod:`sleuth.eval.report` writes the results folder and compares
two of them.
"""
