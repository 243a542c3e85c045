"""report.html in a real browser: headless Chromium opens the report of an analyzed scenario and
we check no console errors, a screenshot that is not blank, the findings shown equal
findings.json, and that a filter click narrows the list.

Chromium and chromedriver come from Debian (``.ci/run`` installs them); selenium is pointed at
them explicitly so its driver manager never tries the network. Without them the test is skipped,
unless KF_REQUIRE_BROWSER=1 (set by .ci/run), where it fails.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import time
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("KF_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("KF_CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-sync", "--window-size=1400,1000")
SCENARIO = "unclean-election"


def _missing_browser() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.exists(path) or shutil.which(path)):
            return f"{path} not found (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def analyzed_scenario_dir(spark, tmp_path_factory) -> Path:
    """An analyze output DIR of a sample-data scenario, through the real pipeline (the test run's
    Spark session; the catalog is not needed by the report)."""
    from analyzer.analyze import build
    from sample_data.scenarios import generate

    root = tmp_path_factory.mktemp("scenario")
    data = generate(SCENARIO, root / "data", partitions=2)
    out = root / "out"
    build([data], out, ledger=data / "ledger.jsonl", spark=spark, progress=False, register_catalog=False)
    assert (out / "report.html").exists() and (out / "findings.json").exists()
    return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    reason = _missing_browser()
    if reason:
        if os.environ.get("KF_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser test required but {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager reach the network
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


# Decodes a PNG (given as base64) in the page's own canvas and measures it: the share of pixels
# that differ from the most common colour, and the number of distinct colours. Python has no PNG
# decoder in the standard library, and a pure-Python unfilter takes minutes per screenshot.
PNG_STATS_JS = """
const done = arguments[arguments.length - 1];
const img = new Image();
img.onload = () => {
  const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
  const ctx = c.getContext('2d'); ctx.drawImage(img, 0, 0);
  const px = ctx.getImageData(0, 0, c.width, c.height).data, counts = new Map();
  for (let i = 0; i < px.length; i += 4) { const k = (px[i] << 16) | (px[i + 1] << 8) | px[i + 2]; counts.set(k, (counts.get(k) || 0) + 1); }
  const top = Math.max(...counts.values()), total = px.length / 4;
  done([1 - top / total, counts.size, c.width, c.height]);
};
img.onerror = () => done(null);
img.src = 'data:image/png;base64,' + arguments[0];
"""


def png_stats(driver, png: bytes) -> tuple[float, int, int, int]:
    """(share of pixels not in the dominant colour, distinct colours, width, height) of a PNG."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    stats = driver.execute_async_script(PNG_STATS_JS, base64.b64encode(png).decode("ascii"))
    assert stats is not None, "the screenshot could not be decoded"
    return stats[0], stats[1], stats[2], stats[3]


def severe_logs(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def shown_count(driver) -> int:
    return driver.execute_script("return document.querySelectorAll('#findings-list li.finding:not([hidden])').length")


def test_report_in_headless_chromium(browser, analyzed_scenario_dir, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    out = analyzed_scenario_dir
    findings = json.loads((out / "findings.json").read_text())["findings"]
    assert findings, "the scenario must produce findings for this test to mean anything"
    browser.get((out / "report.html").resolve().as_uri())
    WebDriverWait(browser, 60).until(lambda d: d.execute_script("return document.readyState") == "complete")
    assert browser.execute_script("return typeof Plotly") == "object"

    # the findings shown are exactly findings.json's
    shown = browser.execute_script("return Array.from(document.querySelectorAll('#findings-list li.finding')).map(li => "
                                   "[li.dataset.findingId, li.dataset.severity, li.dataset.kind])")
    assert sorted(map(tuple, shown)) == sorted((f["id"], f["severity"], f["kind"]) for f in findings)
    assert shown_count(browser) == len(findings)

    # a finding's link opens and draws its partition's timeline
    link = browser.find_element(By.CSS_SELECTOR, "#findings-list a.partition-link")
    target = link.get_attribute("data-target")
    link.click()
    if target != "p-cluster-wide":
        WebDriverWait(browser, 60).until(lambda d: d.execute_script(
            "return document.getElementById(arguments[0]).querySelector('.js-plotly-plot .main-svg') !== null", target))
    time.sleep(0.5)
    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    browser.set_script_timeout(60)
    changed, colours, width, height = png_stats(browser, shot.read_bytes())
    assert width >= 800 and height >= 600, (width, height)
    assert changed > 0.05 and colours > 20, (changed, colours)

    # filters narrow the list: switch one severity off, then pick one kind
    severity = max({f["severity"] for f in findings}, key=lambda s: sum(f["severity"] == s for f in findings))
    toggle = browser.find_element(By.CSS_SELECTOR, f"button.sev-toggle[data-severity='{severity}']")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", toggle)
    toggle.click()
    assert shown_count(browser) == sum(f["severity"] != severity for f in findings) < len(findings)
    counter = browser.find_element(By.ID, "findings-count").text
    assert counter == f"{shown_count(browser)} of {len(findings)} findings"
    toggle.click()
    assert shown_count(browser) == len(findings)
    kind = findings[0]["kind"]
    Select(browser.find_element(By.ID, "filter-kind")).select_by_value(kind)
    assert shown_count(browser) == sum(f["kind"] == kind for f in findings)

    # a clean partition (if any) draws only when opened
    clean = browser.execute_script("return Array.from(document.querySelectorAll('details.partition.clean')).map(d => d.id)")
    if clean:
        assert browser.execute_script("return document.querySelectorAll('details.partition.clean[data-drawn]').length") == 0
        browser.execute_script("document.getElementById('clean-partitions').open = true; document.getElementById(arguments[0]).open = true", clean[0])
        WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.getElementById(arguments[0]).hasAttribute('data-drawn')", clean[0]))

    assert severe_logs(browser) == []
