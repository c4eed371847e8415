"""The dashboard's sweep page: the combined table with the numbers of `runjob report SWEEP --json`,
the elements' loss curves overlaid, everything escaped; checked in the HTML and in a real
headless Chromium (skipped where it is not installed, required on CI)."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runjob_core.reporting.dashboard import page_name
from runjob_core.reporting.sweeps import sweep_page_name

RUNJOB = str(Path(sys.executable).parent / "runjob")
XSS = "<script>window.__pwned = 1</script>"
STEPS = 6

#: A loss per step from the element's lr (its own curve), then 8 scored rows in two categories.
ELEMENT = r'''
import json, os, pathlib, time
from runjob_core.job import progress
params = json.load(open(os.environ["RUNJOB_PARAMS"]))
for step in range(1, STEPS + 1):
    progress(step=step, loss=round(params["lr"] * 10 / step + params["seed"] * 0.01, 6))
    time.sleep(0.05)
results = pathlib.Path(os.environ["RUNJOB_RESULTS"])
results.mkdir(parents=True, exist_ok=True)
with open(results / "results.jsonl", "w") as f:
    for i in range(8):
        score = int((i + params["seed"] + round(params["lr"] * 10)) % 3 == 0)
        f.write(json.dumps({"id": i, "response": params["note"], "category": "a" if i < 4 else "b", "score": score}) + "\n")
'''.replace("STEPS", str(STEPS))


def runjob(*args, cwd, check=0):
    result = subprocess.run([RUNJOB, *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                            env={**__import__("os").environ, "COLUMNS": "200"})
    assert result.returncode == check, (result.stdout, result.stderr)
    return result


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    work = tmp_path_factory.mktemp("dashsweep")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        for var in ("RUNJOB_HOME", "RUNJOB_CLUSTERS"):
            mp.delenv(var, raising=False)
        mp.setenv("XDG_CONFIG_HOME", str(work / "config"))
        (work / "element.py").write_text(ELEMENT)
        spec = {"name": "dash", "command": f"{sys.executable} element.py", "params": {"note": XSS},
                "sweep": {"params": {"lr": [0.1, 0.3], "seed": [1, 2]},
                          "include": [{"lr": 0.2, "seed": 3, "note": XSS + "<b>x</b>"}], "max_parallel": 3}}
        (work / "dash.yaml").write_text(yaml.safe_dump(spec))
        runjob("run", "dash.yaml", "--yes", cwd=work)
        report = json.loads(runjob("report", "dash", "--json", cwd=work).stdout)
        runjob("dashboard", "--out", str(work / "site"), cwd=work)
        yield {"work": work, "out": work / "site", "report": report}


def cells(page: str, element: int) -> dict[str, str]:
    row = re.search(rf'<tr data-element="{element}"[^>]*>(.*?)</tr>', page).group(1)
    return {m.group(1): html.unescape(re.sub(r"<[^>]+>", "", m.group(2)))
            for m in re.finditer(r'<td class="col-([a-z0-9-]+)"[^>]*>(.*?)</td>', row)}


def test_the_sweep_page_shows_the_combined_report_numbers(site):
    report, out = site["report"], site["out"]
    page = (out / sweep_page_name(report["sweep"]["id"])).read_text()
    assert len(re.findall(r'<tr data-element="', page)) == len(report["elements"]) == 5
    for element in report["elements"]:
        shown = cells(page, element["index"])
        score = element["score"]
        assert shown["element"] == element["name"] and shown["state"] == "COMPLETED"
        assert shown["rows"] == str(element["rows"]) == "8"
        assert shown["mean"] == f"{score['mean']:.3f}" and shown["median"] == f"{score['median']:.3f}"
        assert shown["95-ci"] == f"[{score['ci_low']:.3f}, {score['ci_high']:.3f}]"
        assert f'data-sort="{score["mean"]}"' in re.search(rf'<tr data-element="{element["index"]}".*?</tr>', page).group(0)
        assert f'href="{page_name(element["job_id"])}"' in page and (out / page_name(element["job_id"])).exists()
    best = report["best"]
    assert f"best: {best['name']}" in html.unescape(page)
    assert "Mean score by category" in page
    # The index of sweeps links the page; the nav links the index.
    index = (out / "sweeps.html").read_text()
    assert f'href="{sweep_page_name(report["sweep"]["id"])}"' in index and "5</td>" in index
    assert 'href="sweeps.html"' in (out / "index.html").read_text()


def test_the_elements_loss_curves_are_overlaid_one_line_each(site):
    report, out = site["report"], site["out"]
    page = (out / sweep_page_name(report["sweep"]["id"])).read_text()
    figure = re.search(r'<figure class="metric overlay" data-series="loss">.*?</figure>', page).group(0)
    lines = re.findall(r'<polyline class="curve" data-line="([^"]+)" data-points="(\d+)"', figure)
    assert sorted(lines) == sorted((e["name"], str(STEPS)) for e in report["elements"])


def test_the_sweep_page_escapes_every_value(site):
    page = (site["out"] / sweep_page_name(site["report"]["sweep"]["id"])).read_text()
    assert "<script>window" not in page and "<b>x</b>" not in page
    assert "&lt;script&gt;window.__pwned" in page  # the include's note is a varying value: shown, escaped


def test_a_rebuild_with_nothing_changed_keeps_the_sweep_page(site):
    out, sweep_id = site["out"], site["report"]["sweep"]["id"]
    page = out / sweep_page_name(sweep_id)
    before = page.stat().st_mtime_ns
    from runjob_core import lifecycle
    from runjob_core.reporting.dashboard import Builder

    context = lifecycle.open_context(clusters_path=None)
    try:
        built = Builder(context.store, out, clusters=context.clusters)
        built.build()
        assert built._sweeps(context.store.list_jobs(limit=10**6), {}) == 1  # no stamps given: rebuilt
    finally:
        context.close()
    assert page.stat().st_mtime_ns == before  # the same bytes are not written again


def test_the_sweep_page_in_a_real_browser(site, tmp_path):
    from selenium.webdriver.common.by import By

    from tests.reporting.test_report_jobs import _chromium, console_errors

    report, out = site["report"], site["out"]
    browser = _chromium()
    try:
        browser.get((out / "sweeps.html").as_uri())
        browser.find_element(By.CSS_SELECTOR, "#sweeps tbody a").click()
        assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Sweep dash")
        assert browser.execute_script("return window.__pwned === undefined")
        header = [h for h in browser.find_elements(By.CSS_SELECTOR, "#elements thead th") if h.text == "mean"][0]
        header.click()
        header.click()  # descending: the best element first
        first = browser.find_element(By.CSS_SELECTOR, "#elements tbody tr")
        assert int(first.get_attribute("data-element")) == report["best"]["index"]
        curves = browser.find_elements(By.CSS_SELECTOR, 'figure.overlay[data-series="loss"] polyline.curve')
        assert len(curves) == 5 and browser.find_element(By.CSS_SELECTOR, "figure.overlay svg").size["width"] > 300
        browser.save_screenshot(str(tmp_path / "sweep.png"))
        assert console_errors(browser) == []
    finally:
        browser.quit()


def test_a_large_sweep_draws_the_best_scoring_elements_curves():
    from runjob_core.reporting import sweeps

    def element(i, mean):
        return {"index": i, "name": f"e{i}", "job_id": f"rj-{i}", "score": {"mean": mean} if mean is not None else None}

    scored = [element(i, (i * 37 % 100) / 100) for i in range(100)]
    jobs, note = sweeps._drawn({"elements": scored})
    means = sorted((e["score"]["mean"] for e in scored), reverse=True)[:sweeps.MAX_CURVES]
    assert sorted(scored[i]["score"]["mean"] for i, _n, _j in jobs) == sorted(means)
    assert [i for i, _n, _j in jobs] == sorted(i for i, _n, _j in jobs)  # drawn in index order
    assert "40 best-scoring of 100 elements (60 more" in note
    # A training sweep without scores: the first 40; a few scored ones come first.
    jobs, note = sweeps._drawn({"elements": [element(i, None) for i in range(50)]})
    assert [i for i, _n, _j in jobs] == list(range(40)) and "the first 40 of 50" in note
    jobs, note = sweeps._drawn({"elements": [element(i, 0.5 if i in (45, 47) else None) for i in range(50)]})
    assert {45, 47} <= {i for i, _n, _j in jobs} and len(jobs) == 40 and "the 2 scored" in note
    assert sweeps._drawn({"elements": scored[:40]})[1] == ""
