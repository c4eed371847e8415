"""Recall and precision of the log checks on the real-log corpus, per label, before and after.

    .venv/bin/python plugins/health/tests/corpus_report.py [--before COMMIT] [--split heldout|tuning|all]

Two corpora of real logs (each file names its public source in an ``index.json``):

* ``data/logs``: the logs the checks were built and tuned on; ``test_health_scan.py``
  requires every one of them to yield exactly its labels.
* ``data/heldout``: logs kept out of tuning.  No rule was written or changed after looking
  at how the checks do on them; this report is the only thing that reads them (and
  ``test_heldout_corpus.py``, which asserts no alarm on their healthy logs).

"before" runs the ``runjob_health`` package of an earlier commit (default: the commit
before health round 3), extracted with ``git archive`` into a temporary folder and run in
a separate process; "after" runs the working tree's.  A finding counts for its label
whatever its action; an *alarm* is a finding whose action stops, resumes or retries the job
(a warning or note is not).  Precision per label = logs where the label was expected among
logs where it was reported.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
SPLITS = {"tuning": HERE / "data" / "logs", "heldout": HERE / "data" / "heldout"}
BEFORE = "556418b"          # main before health round 3 (issue 35 / issue 29 item 1)
ALARM_ACTIONS = {"stop", "resume", "retry"}


def _scan_all(src: Path, folder: Path) -> list[dict]:
    """Scan every log of *folder*'s index with the runjob_health package under *src*."""
    code = (
        "import json, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from pathlib import Path\n"
        "from runjob_health import _scan\n"
        "folder = Path(sys.argv[2])\n"
        "out = []\n"
        "for e in json.loads((folder / 'index.json').read_text()):\n"
        "    hits = _scan.scan_file(folder / e['file'], max_tokens=e.get('max_tokens'), engine='python')\n"
        "    out.append({'file': e['file'], 'hits': [[h.label, h.action] for h in hits]})\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(src), str(folder)], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def measure(src: Path, folder: Path) -> dict:
    index = {e["file"]: e for e in json.loads((folder / "index.json").read_text())}
    support, hit, reported, alarms, healthy, notes = Counter(), Counter(), Counter(), 0, 0, 0
    for row in _scan_all(src, folder):
        want = set(index[row["file"]]["labels"])
        got = {label for label, _ in row["hits"]}
        for label in want:
            support[label] += 1
            hit[label] += label in got
        for label in got:
            reported[label] += 1
            hit_fp = label not in want
            if hit_fp:
                reported[(label, "false")] += 1
        if not want:
            healthy += 1
            alarms += any(action in ALARM_ACTIONS for _, action in row["hits"])
            notes += bool(row["hits"]) and not any(action in ALARM_ACTIONS for _, action in row["hits"])
    labels = sorted(set(support) | {k for k in reported if isinstance(k, str)})
    per = {}
    for label in labels:
        false = reported[(label, "false")]
        true = reported[label] - false
        per[label] = {"logs": support[label], "found": hit[label], "reported": reported[label], "false": false,
                      "recall": hit[label] / support[label] if support[label] else None,
                      "precision": true / reported[label] if reported[label] else None}
    return {"labels": per, "healthy": healthy, "healthy_alarms": alarms, "healthy_notes": notes,
            "logs": len(index)}


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(name: str, before: dict, after: dict) -> str:
    rows = [f"{name}: {after['logs']} logs, {after['healthy']} of them healthy; alarms on healthy logs: "
            f"before {before['healthy_alarms']}, after {after['healthy_alarms']} (notes: after "
            f"{after['healthy_notes']})",
            "",
            "| label | logs | recall before | recall after | precision before | precision after |",
            "|---|---|---|---|---|---|"]
    for label in sorted(set(before["labels"]) | set(after["labels"])):
        b, a = before["labels"].get(label, {}), after["labels"].get(label, {})
        logs = a.get("logs") or b.get("logs") or 0
        rows.append(f"| {label} | {logs} | {_fmt(b.get('recall'))} ({b.get('found', 0)}/{logs}) "
                    f"| {_fmt(a.get('recall'))} ({a.get('found', 0)}/{logs}) "
                    f"| {_fmt(b.get('precision'))} | {_fmt(a.get('precision'))} |")
    return "\n".join(rows)


def extract(commit: str, into: Path) -> Path:
    """The runjob_health package of *commit*, as files under *into*."""
    repo = HERE.parents[2]
    archive = subprocess.run(["git", "-C", str(repo), "archive", commit, "plugins/health/src/runjob_health"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "plugins" / "health" / "src"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default=BEFORE, help="commit whose checks are 'before'")
    ap.add_argument("--split", choices=("heldout", "tuning", "all"), default="all")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    splits = list(SPLITS) if args.split == "all" else [args.split]
    with tempfile.TemporaryDirectory() as tmp:
        old = extract(args.before, Path(tmp))
        results = {s: (measure(old, SPLITS[s]), measure(SRC, SPLITS[s])) for s in splits}
    if args.json:
        print(json.dumps({s: {"before": b, "after": a} for s, (b, a) in results.items()}, indent=1))
        return 0
    for s, (b, a) in results.items():
        print(table(s, b, a))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
