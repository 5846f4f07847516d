"""bench/authors_agreement.py's matching of gridfair's tasks with the SDRF authors' output:
a resubmitted task id is matched submission by submission, and a file from another task list
is an error naming the task, not a figure."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from gridfair.core.pool import Task
from gridfair.errors import InputError

BENCH = Path(__file__).resolve().parents[1] / "bench" / "authors_agreement.py"
_spec = importlib.util.spec_from_file_location("authors_agreement", BENCH)
agreement = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = agreement  # dataclasses look their module up
_spec.loader.exec_module(agreement)


def task(task_id: str, submit_s: float, start_s: float | None) -> Task:
    made = Task(task_id, "u", submit_s, cpus=1.0, duration=1.0)
    made.first_start = start_s
    return made


def authors_file(tmp_path: Path, rows: list[tuple[int, int, str]]) -> Path:
    # Their output: the task list's 7 columns in the order tasks finished.
    path = tmp_path / "task_sim.csv"
    path.write_text("".join(f"{submit},{start},{start + 10**6},u,{task_id},1.0,0.5\n"
                            for submit, start, task_id in rows))
    return path


def test_resubmissions_match_in_submit_order_and_gaps_are_counted(tmp_path) -> None:
    # "a" is submitted twice (gridfair marks the second "a#1"); the authors' file lists the
    # later submission first (it finished first). Gridfair: a at 5 s, b at 12.5 s, a#1 at
    # 20.9999 s; theirs: 5 s, 11 s (1.5 s apart: not within 1 s), 21 s (within 1 s, not equal).
    theirs = agreement.read_authors_starts(authors_file(tmp_path, [
        (20_000_000, 21_000_000, "a"), (1_000_000, 5_000_000, "a"),
        (2_000_000, 11_000_000, "b")]))
    assert theirs["a"] == [(1_000_000, 5_000_000), (20_000_000, 21_000_000)]
    ours = [task("a", 1.0, 5.0), task("b", 2.0, 12.5), task("a#1", 20.0, 20.9999)]
    figures = agreement.compare(ours, theirs, "theirs", show=5)
    assert (figures["tasks"], figures["exact"], figures["within_1s"]) == (3, 1, 2)
    assert figures["first_disagreements"] == [
        {"task": "b", "user": "u", "submit_us": 2_000_000, "authors_start_us": 11_000_000,
         "gridfair_start_us": 12_500_000}]


def test_another_task_lists_output_is_refused(tmp_path) -> None:
    theirs = agreement.read_authors_starts(authors_file(tmp_path, [(1_000_000, 5_000_000, "a")]))
    with pytest.raises(InputError, match="submitted at 1000000 us there and 3000000 us here"):
        agreement.compare([task("a", 3.0, 5.0)], theirs, "theirs", show=5)
    with pytest.raises(InputError, match="task z .* is not in the authors' output"):
        agreement.compare([task("z", 1.0, 5.0)], theirs, "theirs", show=5)
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3,u,a,1.0\n")
    with pytest.raises(InputError, match="expected 7 columns"):
        agreement.read_authors_starts(bad)
