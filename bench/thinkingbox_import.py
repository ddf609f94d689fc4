"""Import throughput for ThinkingBox files: tb infer results (rows/s) and the dataset (tasks/s).

Usage: python3 bench/thinkingbox_import.py [--rows 20000] [--dataset-repeats 5]
The results file is the real append_r6.jsonl replicated to ~20k rows in a temp file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tb_engine.thinkingbox.dataset import parse_dataset
from tb_engine.thinkingbox.results import parse_tb_results
from tests.support.paths import THINKINGBOX_DIR

REF = THINKINGBOX_DIR  # ../shared beside the checkout, or TB_SHARED_DIR


def results_rows_per_s(rows: int) -> float:
    lines = (REF / "tb_infer/append_r6.jsonl").read_text().splitlines()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        with path.open("w") as handle:
            for i in range(rows):
                handle.write(lines[i % len(lines)] + "\n")
        started = time.perf_counter()
        records = parse_tb_results(path)
        elapsed = time.perf_counter() - started
    assert len(records) == rows
    print(f"results: {rows} rows in {elapsed:.2f} s")
    return rows / elapsed


def dataset_tasks_per_s(repeats: int) -> float:
    started = time.perf_counter()
    tasks = 0
    for _ in range(repeats):
        suite, _ = parse_dataset(REF / "dataset")
        tasks += len(suite.tasks)
    elapsed = time.perf_counter() - started
    print(f"dataset: {tasks} tasks ({repeats} passes) in {elapsed:.2f} s")
    return tasks / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--dataset-repeats", type=int, default=5)
    args = parser.parse_args()
    rows = results_rows_per_s(args.rows)
    tasks = dataset_tasks_per_s(args.dataset_repeats)
    print(f"RESULT results_rows_per_s={rows:.0f} dataset_tasks_per_s={tasks:.0f}")


if __name__ == "__main__":
    main()
