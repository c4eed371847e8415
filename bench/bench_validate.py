"""Benchmark: validate_results on a 1,000,000-row results file vs. just reading it with pyarrow.

    .venv/bin/python bench/bench_validate.py [--rows N] [--repeat K] [--path FILE] [--keep] [--no-python]

Generates realistic eval rows (id, prompt, ~200-char response, finish_reason, num_output_tokens,
score), then times, best of K runs each (interleaved, so load on the machine hits both alike):

* ``pyarrow.json.read_json(path)``: the floor: parse the file into a table, no checks;
* ``validate_results(path, max_tokens=512, score_range=(0, 1))`` (auto engine = pyarrow);
* ``validate_results(..., engine="python")``: the stdlib fallback (once, for information).

Ids are written in order by default; ``--unordered-ids`` shuffles them, which makes the duplicate
check hash every id instead of taking the sorted-ids shortcut (about +0.3 s per million rows).

Target: validate_results <= 2x read_json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runjob_hub.validate import validate_results  # noqa: E402

WORDS = ("the model answer is a of to in that it with as for was on are be by this which or from step "
         "first then therefore so we compute sum total result value equation number solve check").split()


def generate(path: Path, rows: int, seed: int = 0, unordered_ids: bool = False) -> None:
    rng = random.Random(seed)
    responses = []
    for _ in range(4096):  # a pool of distinct ~200-char responses
        text = " ".join(rng.choice(WORDS) for _ in range(60))[:199].rstrip()
        responses.append(text)
    dumps = json.dumps
    with open(path, "w", encoding="utf-8") as f:
        buf = []
        for i in range(rows):
            r = rng.random()
            truncated = r < 0.02
            row = {
                "id": f"gsm8k-{(i * 7919) % rows if unordered_ids else i:07d}",  # 7919 is prime: a permutation
                "prompt": f"Question {i}: Natalia sold clips to {i % 97} of her friends in April, and then she "
                          f"sold half as many clips in May. How many clips did she sell altogether?",
                "response": responses[i & 4095] + ("" if truncated else "."),
                "finish_reason": "length" if truncated else "stop",
                "num_output_tokens": 512 if truncated else 20 + (i * 7919) % 480,
                "score": 1.0 if r > 0.4 else 0.0,
            }
            buf.append(dumps(row))
            if len(buf) == 10_000:
                f.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            f.write("\n".join(buf) + "\n")


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--path", type=Path, help="reuse or create this file instead of a temporary one")
    ap.add_argument("--keep", action="store_true", help="keep the generated file")
    ap.add_argument("--no-python", action="store_true", help="skip timing the stdlib engine")
    ap.add_argument("--unordered-ids", action="store_true",
                    help="write ids out of order (defeats the sorted-id shortcut of the duplicate check)")
    args = ap.parse_args(argv)

    try:
        import pyarrow
        import pyarrow.json as paj
    except ImportError:
        print("pyarrow is not installed: .venv/bin/python -m pip install pyarrow", file=sys.stderr)
        return 2

    tmpdir = None
    path = args.path
    if path is None:
        tmpdir = tempfile.mkdtemp(prefix="bench-validate-")
        path = Path(tmpdir) / "results.jsonl"
    if not path.exists():
        t = timed(lambda: generate(path, args.rows, unordered_ids=args.unordered_ids))
        print(f"generated {args.rows:,} rows in {t:.1f}s")
    size_mb = path.stat().st_size / 1e6
    print(f"file: {path} ({size_mb:.0f} MB), pyarrow {pyarrow.__version__}, {os.cpu_count()} CPUs, "
          f"python {sys.version.split()[0]}")

    report = None

    def run_validate():
        nonlocal report
        report = validate_results(path, max_tokens=512, score_range=(0, 1))

    reads, vals = [], []
    timed(lambda: paj.read_json(path))  # warm the page cache
    for _ in range(args.repeat):
        reads.append(timed(lambda: paj.read_json(path)))
        vals.append(timed(run_validate))
    best_read, best_val = min(reads), min(vals)
    print(f"pyarrow.json.read_json : best {best_read:.2f}s  median {statistics.median(reads):.2f}s  "
          f"({size_mb / best_read:.0f} MB/s)")
    print(f"validate_results       : best {best_val:.2f}s  median {statistics.median(vals):.2f}s  "
          f"(engine={report.engine}, {report.rows:,} rows, {len(report.problems)} problem(s))")
    ratio = best_val / best_read
    print(f"ratio validate/read_json: {ratio:.2f}x (best of {args.repeat}; median ratio "
          f"{statistics.median(vals) / statistics.median(reads):.2f}x)  target <= 2x: "
          f"{'OK' if ratio <= 2 else 'MISSED'}")
    if not args.no_python:
        t = timed(lambda: validate_results(path, max_tokens=512, score_range=(0, 1), engine="python"))
        print(f"validate_results engine=python (stdlib fallback): {t:.2f}s ({t / best_read:.1f}x read_json)")
    print(report.summary())

    if tmpdir and not args.keep:
        path.unlink()
        os.rmdir(tmpdir)
    elif tmpdir:
        print(f"kept {path}")
    return 0 if ratio <= 2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
