"""The web console in a real headless Chromium (issue 25), driven by Playwright with the
system's browser, against a running line of three routers (OS processes).

Debian's ``chromium`` is installed here when missing (as root, like the C bench's
Proton-C); the screenshot is kept in ``tests/artifacts/console.png`` for a person to look at.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from support.browser import FLAGS, chromium
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.routers import Network

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
ACCEPTED = 36


@pytest.fixture
def line3(tmp_path):
    net = Network("line3.yaml", tmp_path, settings={"router_dead_after": "2s"})
    yield net
    net.stop()


def test_console_shows_the_network_a_rate_and_a_router_dying(line3, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    executable = chromium()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(line3["A"].http + "/")
            for r in "ABC":
                expect(page.locator(f'[data-router="{r}"]')).to_have_attribute("data-state", "up", timeout=15_000)
            sub = ProtonSubscriber(line3["C"].url, "prices", name="board")
            pub = ProtonPublisher(line3["A"].url, "prices")
            received = page.locator('[data-topic="prices"] [data-rate="received"]')
            expect(page.locator('[data-topic="prices"]')).to_be_visible(timeout=15_000)
            # A steady stream, in batches each answered before the next, until a frame (one a
            # second) shows its rate; then the rest of the frames keep moving it.
            sent = 0
            while received.text_content() in ("0", None):
                batch = [pub.send(f"p{sent + i}") for i in range(20)]
                assert [o.get(timeout=30) for o in batch] == [ACCEPTED] * 20
                sent += 20
                assert sent < 100_000, "the console's rate never moved"
            assert [m.body for m in sub.take(sent)] == [f"p{i}" for i in range(sent)]
            # (what A's publishers were told, not what subscribers here answered: the header
            # said "accepted 0" with the subscriber at C; issue 50, item 14)
            expect(page.locator("#totals")).to_contain_text(f"publishers told accepted {sent};", timeout=5_000)
            expect(page.locator('[data-edge="A-B"]')).to_have_attribute("data-state", "up")
            # the publisher's host and (anonymous) user hold its connection at A
            expect(page.locator('[data-principal="host 127.0.0.1"] [data-held="connections"]')).to_have_text("1")
            expect(page.locator('[data-principal="user anonymous"]')).to_be_visible()
            line3["C"].proc.send_signal(signal.SIGKILL)
            # Within the dead-after time (2 s here; the frame comes a second later at most):
            expect(page.locator('[data-router="C"]')).to_have_attribute("data-state", "down", timeout=6_000)
            expect(page.locator('[data-edge="B-C"]')).to_have_attribute("data-state", "down")
            expect(page.locator('[data-router="B"]')).to_have_attribute("data-state", "up")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "console.png"), full_page=True)
            sub.close()
            pub.close()
        finally:
            browser.close()
