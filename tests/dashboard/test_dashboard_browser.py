"""`geops dashboard` in a real browser while the app and the distributor run on a live stream.

The broker (shared by the whole test run), the distributor (a thread, mode dynamic with the
test settings of ``test_service_app``), the app (this process) and `geops dashboard --port 0`
(a subprocess) run; a producer writes a skewed stream while they do. Headless Chromium (Debian's
``chromium`` and ``chromium-driver``, through Selenium) opens the page at 1280x720 and must
see the map's cells coloured with live load, the series fill with live values at least once
a second, and, after the distributor commands a rebalance, that rebalance on the page with
the epoch and moves of the command on the control topic; hovering a cell shows its id,
owner, load and subscriptions. No console errors; a screenshot is saved
(``GEOPS_DASHBOARD_SCREENSHOT`` names a copy to keep).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distributor.service import Service
from geops.workload import SkewSpec, generate_workload
from kafkaio.dump import by_schema
from tests.app.conftest import run_app
from tests.app.live import LiveProducer, Phase, load_subscriptions_only
from tests.distributor.test_service import running
from tests.distributor.test_service_app import SETTINGS

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
PARTITIONS = 16
PUBLICATIONS = 12_000
RATE = 1_500          # publications/s written while the app runs (the app takes ~1,000/s)


def wait_for(what: str, check: Callable[[], Any], timeout: float, every: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"the page did not show {what} within {timeout:.0f} s")
        time.sleep(every)


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=DriverService(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 720, "deviceScaleFactor": 1,
                            "mobile": False})
    return driver


def number(text: str) -> float | None:
    """The number a figure shows ('1,234' -> 1234), None for '–'."""
    text = text.strip().replace(",", "")
    return float(text) if re.fullmatch(r"-?\d+(\.\d+)?", text) else None


class PageChecks(threading.Thread):
    """Watches the page while the app runs in the main thread; ``error`` holds what failed."""

    def __init__(self, url: str, shot: Path):
        super().__init__(daemon=True)
        self.url = url
        self.shot = shot
        self.seen: dict[str, Any] = {}
        self.error: BaseException | None = None
        self.console: list[dict] = []

    def run(self) -> None:
        driver = browser()
        try:
            self._check(driver)
        except BaseException as exc:  # reported by the test
            self.error = exc
            with contextlib.suppress(Exception):
                driver.save_screenshot(str(self.shot))
        finally:
            try:
                self.console = driver.get_log("browser")
            finally:
                driver.quit()

    def _text(self, driver: Any, css: str) -> str:
        return driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';",
            css)

    def _points(self, driver: Any) -> int:
        found = re.search(r"([\d,]+) publications", self._text(driver, "#map-note"))
        return int(found.group(1).replace(",", "")) if found else 0

    def _check(self, driver: Any) -> None:
        js = driver.execute_script
        driver.get(self.url)
        assert js("return [innerWidth, innerHeight]") == [1280, 720]
        # the map: one cell per partition, some coloured by live load
        wait_for("the partition cells", lambda: js(
            "return document.querySelectorAll('#map path.cell').length") == PARTITIONS, 90)
        wait_for("cells coloured by load", lambda: js(
            "return [...document.querySelectorAll('#map path.cell')]"
            ".filter(p => p.getAttribute('fill') !== '#f2f2f2').length") >= 2, 60)
        wait_for("publications on the map", lambda: self._points(driver) > 0, 30)
        # the series: live figures
        wait_for("an output rate", lambda: (number(self._text(driver, "#v-output")) or 0) > 0,
                 30)
        wait_for("an input rate", lambda: (number(self._text(driver, "#v-input")) or 0) > 0,
                 30)
        wait_for("latency and MLDC", lambda: all(
            number(self._text(driver, f"#v-{k}")) is not None for k in ("p50", "p99", "mldc")),
            30)
        self.seen["figures"] = {k: self._text(driver, f"#v-{k}")
                                for k in ("input", "output", "lag", "p50", "p99", "mldc",
                                          "workers")}
        # updated at least once a second, without reloading
        points, version = js("return [S.t.length, Number(document.body.dataset.version)]")
        time.sleep(3.2)
        points2, version2 = js("return [S.t.length, Number(document.body.dataset.version)]")
        assert version2 - version >= 3 and points2 - points >= 2, (points, points2, version,
                                                                   version2)
        assert js("return performance.getEntriesByType('navigation').length") == 1
        # hovering a cell tells what it is
        from selenium.webdriver.common.action_chains import ActionChains

        cell = driver.find_element("css selector", '#map path.cell[data-partition="0"]')
        ActionChains(driver).move_to_element(cell).perform()
        tip = wait_for("a cell's tooltip", lambda: self._text(driver, ".leaflet-tooltip"), 10)
        assert "partition 0" in tip and "owner" in tip and "ms/s" in tip
        assert "subscriptions: " in tip, tip
        ActionChains(driver).move_by_offset(0, 300).perform()
        # the rebalance the distributor commands shows up
        row = wait_for("a rebalance", lambda: self._text(
            driver, '#rebalances tr[data-epoch="1"]'), 90)
        self.seen["rebalance"] = row
        wait_for("the epoch in force", lambda: self._text(driver, "#epoch") == "epoch 1", 60)
        self.seen["banner_hidden"] = js("return document.getElementById('banner').hidden")
        self.seen["title"] = driver.title
        time.sleep(1.5)  # a period or two on epoch 1 in the picture
        driver.save_screenshot(str(self.shot))


@pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                    reason="Chromium is not installed: apt-get install chromium "
                           "chromium-driver (scripts/test does so when run as root)")
def test_the_page_follows_a_live_stream_and_its_rebalance(kafka_cfg, geops_env, tmp_path):
    w = generate_workload(seed=3, subscriptions=2000, publications=PUBLICATIONS,
                          skew=SkewSpec(workers=2, hot_workers=1, partitions=PARTITIONS,
                                        partitioner="kdbtree", target=0.9))
    load_subscriptions_only(kafka_cfg.with_overrides({"topics.publications.partitions": "1"}),
                            w.subscriptions)
    log = tmp_path / "dashboard.log"
    with log.open("w") as err:
        dashboard = subprocess.Popen(
            [sys.executable, "-m", "cli", "dashboard", "--port", "0", "--history", "2m"],
            env={**os.environ, **geops_env}, stdout=subprocess.PIPE, stderr=err, text=True)
    shot = tmp_path / "dashboard.png"
    try:
        line = dashboard.stdout.readline()
        assert " at http://127.0.0.1:" in line, line
        url = line.split(" at ", 1)[1].split(" ", 1)[0]
        checks = PageChecks(url, shot)
        checks.start()
        service = Service(kafka_cfg.with_overrides({**SETTINGS, "distributor.mode": "dynamic"}))
        producer = LiveProducer(kafka_cfg, w.publications, [Phase(PUBLICATIONS, rate=RATE)])
        with running(service):
            producer.start()
            assert run_app("--strategy", "sPS", "--partitions", str(PARTITIONS),
                           "--max-records-per-trigger", "400", "--stop-after-idle", "3s") == 0
        producer.join()
        checks.join(120)
        assert not checks.is_alive(), "the page checks did not finish"
        if checks.error is not None:
            raise checks.error
        severe = [e for e in checks.console if e["level"] == "SEVERE"]
        assert not severe, severe

        (command,) = by_schema(kafka_cfg.kafka_client(),
                               kafka_cfg.topic("control"))["RebalanceCommand"]
        row = checks.seen["rebalance"]
        moves = len(command["moves"])
        assert row.startswith("1") and f"{moves} move{'s' if moves != 1 else ''}" in row, row
        for m in command["moves"]:
            assert f"p{m['partition']} {m['from_worker']}→{m['to_worker']}" in row, row
        assert checks.seen["banner_hidden"] and checks.seen["title"] == "geops dashboard"
        print(f"\ndashboard figures {checks.seen['figures']}; rebalance row: {row}; "
              f"screenshot {shot}")
        assert shot.stat().st_size > 10_000
        keep = os.environ.get("GEOPS_DASHBOARD_SCREENSHOT")
        if keep:
            shutil.copyfile(shot, keep)
    finally:
        dashboard.send_signal(signal.SIGTERM)
        try:
            code = dashboard.wait(20)
        except subprocess.TimeoutExpired:
            dashboard.kill()
            code = dashboard.wait()
    assert code == 0, log.read_text()[-2000:]
