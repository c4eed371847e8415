"""A job for the resume tests: writes N rows through ResultsWriter at a steady pace.

usage: rows_job.py N DELAY [--torn-after K] [--checkpoints]
--torn-after K: after K rows, leave a torn line (as a kill mid-write would) and SIGKILL itself.
--checkpoints: save a checkpoint folder every 50 rows (marker written after the files).
"""
import json
import os
import signal
import sys
import time

from runjob_core.job import RESUME_EXIT_CODE, ResultsWriter, checkpoint_saved, on_preempt_signal, progress, should_stop

n, delay = int(sys.argv[1]), float(sys.argv[2])
torn_after = int(sys.argv[sys.argv.index("--torn-after") + 1]) if "--torn-after" in sys.argv else None
checkpoints = "--checkpoints" in sys.argv
on_preempt_signal()
print(f"resume from: {os.environ.get('RUNJOB_RESUME_FROM') or '-'}", flush=True)
with ResultsWriter("rows.jsonl") as out:
    print(f"already done: {len(out.done)}, repaired bytes: {out.repaired_bytes}", flush=True)
    for i in range(n):
        if i in out.done:
            continue
        out.write({"id": i, "response": f"row {i}.", "score": i % 2})
        progress(rows_done=len(out.done), total=n)
        if checkpoints and len(out.done) % 50 == 0:
            folder = os.path.join(os.environ["RUNJOB_CHECKPOINT_DIR"], f"step-{len(out.done)}")
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "state.json"), "w") as handle:
                json.dump({"rows": len(out.done)}, handle)
            out.sync()
            checkpoint_saved(folder, step=len(out.done))
        if torn_after is not None and len(out.done) == torn_after and os.environ.get("RUNJOB_ATTEMPT") == "1":
            out.sync()
            with open(out.path, "ab") as raw:
                raw.write(b'{"id": 99999, "response": "cut in the mi')
            os.kill(os.getpid(), signal.SIGKILL)
        if should_stop():
            out.sync()
            print("time-limit warning: saved, exiting to be resumed", flush=True)
            sys.exit(RESUME_EXIT_CODE)
        time.sleep(delay)
print("all rows written", flush=True)
