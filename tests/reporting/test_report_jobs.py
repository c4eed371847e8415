"""Reports and the dashboard of real jobs on the local backend: a job resumed after its time
limit, a failed one, a canary and one that only prints HF Trainer lines; the dashboard opened
in a real headless Chromium."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runjob_core import lifecycle, monitor
from runjob_core.config import job_from_mapping
from runjob_core.reporting import activity
from runjob_core.reporting.dashboard import page_name
from runjob_core.reporting.report import build_report
from runjob_core.testing import wait_until

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "jobs"
RUNJOB = str(Path(sys.executable).parent / "runjob")
STEPS = 14
XSS = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Four jobs run at once, watched to the end and collected: the state every test reads."""
    work = tmp_path_factory.mktemp("sweep")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        for var in ("RUNJOB_HOME", "RUNJOB_CLUSTERS"):
            mp.delenv(var, raising=False)
        mp.setenv("XDG_CONFIG_HOME", str(work / "config"))
        shutil.copy(DATA / "train_job.py", work / "train_job.py")
        shutil.copy(REPO / "runjob_core" / "data" / "examples" / "hello.py", work / "hello.py")
        specs = {
            # 14 steps of 0.3 s under a 3 s limit: stopped by SIGTERM, resumed from the last step.
            "train": {"command": f"{sys.executable} train_job.py {STEPS} 0.3", "resources": {"time": "0:03"}},
            "boom": {"command": "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'; "
                                f"echo {json.dumps(XSS)}; exit 1", "params": {"note": XSS}},
            "hello": {"command": "python3 hello.py", "params": {"questions": 20}, "canary": {"limit": 6}},
            "logonly": {"command": f"{sys.executable} train_job.py 5 0.05 --log-only"},
        }
        context = lifecycle.open_context()
        ids = {}
        for name, raw in specs.items():
            job = job_from_mapping({"name": name, **raw}, source=f"{name}.yaml", base_dir=str(work))
            (work / f"{name}.yaml").write_text(yaml.safe_dump({"name": name, **raw}))
            kind = "canary" if name == "hello" else "full"
            if kind == "canary":
                job = lifecycle.apply_canary(job)
            row, _ = lifecycle.submit(context, job, lifecycle.cluster_for(context, job), spec_path=f"{name}.yaml", kind=kind)
            ids[name] = row.id
        # "boom" has ended before anything watches it. A monitor cycle in the moment between its OOM line and its
        # exit would stop it (cuda_oom's action) and it would end CANCELLED, not FAILED: seen once in CI under load.
        boom = context.store.latest_attempt(ids["boom"]).submission
        wait_until(lambda: Path(boom.extra["exit_file"]).exists(), what="the boom job's exit code")
        monitor.watch(context, list(ids.values()), min_interval=0.2, max_interval=1.0)
        for job_id in ids.values():
            row = context.store.get_job(job_id)
            if row.state == "COMPLETED":
                lifecycle.collect(context, row)
        yield {"work": work, "context": context, "ids": ids}
        context.close()


def recorded_steps(sweep, name):
    row = sweep["context"].store.get_job(sweep["ids"][name])
    history = Path(sweep["context"].store.latest_attempt(row.id).submission.progress_path).parent / "metrics.jsonl"
    lines = [json.loads(line) for line in history.read_text().splitlines()]
    return [(x["attempt"], float(x["step"])) for x in lines if "loss" in x["m"]]


def report_of(sweep, name):
    ctx = sweep["context"]
    return build_report(ctx.store, ctx.store.get_job(sweep["ids"][name]), clusters=ctx.clusters)


def test_resumed_job_report_and_its_curve_across_attempts(sweep):
    report = report_of(sweep, "train")
    attempts = report["attempts"]
    assert report["job"]["state"] == "COMPLETED" and len(attempts) >= 2
    assert attempts[0]["state"] == "TIMEOUT" and attempts[0]["then"].startswith("Job timed out at step")
    assert [a["label"] for a in report["anomalies"] if a["kind"] == "attempts"] == ["attempt"] * (len(attempts) - 1)
    loss = [(n, step, value) for n, series, step, _ts, value in sweep["context"].store.metrics(sweep["ids"]["train"])
            if series == "loss"]
    # One point per recorded step: what the job appended to its history, attempt by attempt
    # (a step the job redid after resuming from an earlier checkpoint is there twice).
    assert [(n, step) for n, step, _v in loss] == recorded_steps(sweep, "train")
    assert {step for _n, step, _v in loss} == set(range(1, STEPS + 1))
    assert {n for n, _s, _v in loss} == {a["n"] for a in attempts}
    for earlier, later in zip(attempts, attempts[1:]):  # each attempt continues where the one before stopped
        first = min(step for n, step, _v in loss if n == later["n"])
        assert first <= max(step for n, step, _v in loss if n == earlier["n"]) + 1
    assert loss[-1][2] == round(2.0 / STEPS ** 0.5, 6)
    assert report["closing"]["missing"] == ["not published to the Hub (no upload.repo in the spec)"]
    assert report["closing"]["line"].startswith("Not complete: not published")


def test_failed_job_report(sweep):
    report = report_of(sweep, "boom")
    assert report["job"]["state"] == "FAILED"
    oom = [a for a in report["anomalies"] if a["label"] == "cuda_oom"]
    assert oom and oom[0]["severity"] == "error" and oom[0]["kind"] == "health"
    assert any("more GPUs" in s and "smaller micro-batch" in s for s in report["next_steps"])
    assert report["closing"]["line"].startswith("Not complete: the job has not completed (state FAILED)")
    assert "results not collected" in report["closing"]["line"]


def test_canary_report_says_go_and_to_scale_up(sweep):
    report = report_of(sweep, "hello")
    assert report["job"]["kind"] == "canary" and report["go_no_go"]["go"] is True
    assert report["results"]["rows"] == 6 and report["results"]["score"]["mean"] == round(5 / 6, 6)
    assert report["next_steps"][0].startswith("canary GO: scale up to the full job with `runjob run hello.yaml`")
    assert [s["why"] for s in report["samples"]] == ["best", "median", "worst"]


def test_a_job_that_only_logs_hf_trainer_lines_gets_a_curve(sweep):
    points = [(s, v) for _n, series, s, _t, v in sweep["context"].store.metrics(sweep["ids"]["logonly"]) if series == "loss"]
    assert points == [(float(i), round(2.0 / i ** 0.5, 6)) for i in range(1, 6)]


def test_cli_report_md_json_and_events_md(sweep):
    env = {**os.environ, "COLUMNS": "200"}
    run = lambda *args: subprocess.run([RUNJOB, *args], cwd=sweep["work"], env=env, capture_output=True, text=True,  # noqa: E731
                                       timeout=60)
    md = run("report", "train", "--md")
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("# Report: train") and "## Next steps" in md.stdout
    data = json.loads(run("report", "boom", "--json").stdout)
    assert data["job"]["state"] == "FAILED"
    text = run("report", "hello").stdout
    assert "Canary verdict: GO" in text and "Not complete:" in text
    events = run("events", "--md").stdout
    assert events == activity.read(sweep["work"] / ".runjob")
    rows = [line for line in events.splitlines()[4:] if "| hello " in line]
    assert [r.split(" | ")[2] for r in rows] == ["results", "validation", "dashboard synced"]
    assert rows[-1].split(" | ")[3:6] == ["6", "-", "0..1"]
    assert "train " in run("events", "train", "--md").stdout and "| hello " not in run("events", "train", "--md").stdout


def test_eval_job_page_has_throughput_and_histograms(sweep):
    page = (sweep["work"] / ".runjob" / "dashboard" / page_name(sweep["ids"]["hello"])).read_text()
    for series in ("rows/s", "score", "tokens"):  # rows_done over time; the results' scores and lengths
        assert f'data-series="{series}"' in page


def test_dashboard_escapes_what_the_job_printed(sweep):
    page = (sweep["work"] / ".runjob" / "dashboard" / page_name(sweep["ids"]["boom"])).read_text()
    assert "<script>window" not in page and "&lt;script&gt;window.__pwned" in page


# ---------------------------------------------------------------------------- the browser


def _chromium():
    webdriver = pytest.importorskip("selenium.webdriver")
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (browser and driver):
        if os.environ.get("CI") == "true":
            pytest.fail("chromium and chromium-driver are required on CI (scripts/test-cluster.sh installs them)")
        pytest.skip("chromium / chromedriver not installed (scripts/test-cluster.sh up installs them as root)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1800"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def console_errors(browser):
    return [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]


def test_dashboard_in_a_real_browser(sweep, tmp_path):
    from selenium.webdriver.common.by import By

    out = tmp_path / "site"
    result = subprocess.run([RUNJOB, "dashboard", "--out", str(out)], cwd=sweep["work"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    index = Path(result.stdout.strip().removeprefix("file://"))
    assert index == out / "index.html"
    browser = _chromium()
    try:
        browser.get(index.as_uri())
        names = [e.text.splitlines()[0] for e in browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr td:first-child")]
        assert sorted(names) == ["boom", "hello canary GO", "logonly", "train"]
        [attempts_header] = [th for th in browser.find_elements(By.CSS_SELECTOR, "#jobs thead th") if th.text == "attempts"]
        attempts_header.click()
        attempts_header.click()  # descending: the resumed job first
        first = browser.find_element(By.CSS_SELECTOR, "#jobs tbody tr")
        assert first.get_attribute("data-job") == sweep["ids"]["train"]
        assert first.find_element(By.CSS_SELECTOR, "td.curve").get_attribute("data-sort") == "loss"  # its sparkline
        assert first.find_element(By.CSS_SELECTOR, "td.curve svg.spark").size["width"] == 90
        browser.save_screenshot(str(tmp_path / "index.png"))
        assert console_errors(browser) == []
        browser.get((out / page_name(sweep["ids"]["train"])).as_uri())
        timeline = browser.find_elements(By.CSS_SELECTOR, "#timeline svg rect.span")
        attempts = len(sweep["context"].store.attempts(sweep["ids"]["train"]))
        assert len(timeline) == attempts >= 2
        kinds = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#timeline table.events td:nth-child(3)")]
        assert {"submitted", "resuming", "collected", "dashboard_synced"} <= set(kinds)
        points = browser.find_elements(By.CSS_SELECTOR, 'figure[data-series="loss"] circle.pt')
        drawn = [(int(p.get_attribute("data-attempt")), float(p.get_attribute("data-step"))) for p in points]
        assert drawn == recorded_steps(sweep, "train")  # one point per recorded step, attempts in order
        assert {n for n, _step in drawn} == set(range(1, attempts + 1))
        assert browser.find_element(By.CSS_SELECTOR, 'figure[data-series="loss"] svg').size["width"] > 300
        browser.save_screenshot(str(tmp_path / "job-train.png"))
        assert console_errors(browser) == []
        browser.get((out / page_name(sweep["ids"]["boom"])).as_uri())
        assert browser.execute_script("return window.__pwned === undefined")
        script = browser.find_element(By.CSS_SELECTOR, "#script pre").get_attribute("textContent")
        assert "<script>window.__pwned = 1</script>" in script  # shown as text, not run
        browser.save_screenshot(str(tmp_path / "job-boom.png"))
        browser.get((out / "clusters.html").as_uri())
        assert browser.find_element(By.TAG_NAME, "h1").text == "GPU-hours by cluster and week"
        assert console_errors(browser) == []
    finally:
        browser.quit()
    print(f"screenshots in {tmp_path}")


def test_preflight_estimates_are_kept_for_estimate_versus_actual(runjob_home):
    context = lifecycle.open_context()
    try:
        job = job_from_mapping({"name": "est", "command": "sleep 1", "params": {"num_samples": 600, "throughput_per_s": 10},
                                "resources": {"time": "0:30"}, "resume": {"auto": False}},
                               source="est.yaml", base_dir=str(runjob_home))
        launched = lifecycle.launch(context, job, spec_path="est.yaml", force=True)
        monitor.watch(context, [launched.row.id], min_interval=0.2, max_interval=1.0)
        estimate = build_report(context.store, context.store.get_job(launched.row.id))["estimate"]
    finally:
        context.close()
    assert estimate["estimated_walltime"] == "00:01:00" and estimate["requested_walltime"] == "0:30"
    assert 1 <= estimate["actual_seconds"] < 30
