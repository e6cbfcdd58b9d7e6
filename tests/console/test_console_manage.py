"""The console's management buttons in a real headless Chromium (issue 50): an admin closes a
subscriber's connection (it is suspended) and drops the suspended subscriber; a user who
is not an admin is refused, and the page says so. A real router process, a Proton client."""

from __future__ import annotations

from pathlib import Path

import yaml
from once.router.security.users import add_user
from once.tools.topology_ports import free_port
from support.browser import FLAGS, chromium
from support.proton_clients import ProtonSubscriber
from support.routers import RouterProcess


def _router(tmp: Path) -> RouterProcess:
    add_user(tmp / "users.yaml", "ops", "ops-pw", ("admin",))
    add_user(tmp / "users.yaml", "viewer", "viewer-pw")
    doc = {"routers": {"A": {"listen": f"127.0.0.1:{free_port()}", "http": f"127.0.0.1:{free_port()}"}},
           "links": [], "auth": {"users_file": "users.yaml", "plain_without_tls": True}}
    (tmp / "topology.yaml").write_text(yaml.safe_dump(doc))
    return RouterProcess(tmp / "topology.yaml")


def test_an_admin_closes_a_connection_and_drops_the_subscriber_from_the_console(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    r = _router(tmp_path)
    sub = ProtonSubscriber(r.url, "consoled", name="board")
    answers: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(), args=FLAGS, headless=True)
            try:
                page = browser.new_page()
                page.on("dialog", lambda d: d.accept(answers.pop(0)))
                page.goto(r.http + "/")
                close = page.locator('button[data-act="close"]')
                expect(close).to_be_visible(timeout=15_000)
                answers += ["viewer", "viewer-pw"]  # (not an admin: refused, and the page says so)
                close.click()
                expect(page.locator("#manage")).to_contain_text("viewer may not change the router", timeout=10_000)
                answers += ["ops", "ops-pw"]
                close.click()
                expect(page.locator("#manage")).to_contain_text('close: {"closed"', timeout=10_000)
                drop = page.locator('button[data-act="drop"]')  # (suspended now: the next frame says so)
                expect(drop).to_be_visible(timeout=15_000)
                drop.click()  # (the credentials are kept: no prompt)
                expect(page.locator("#manage")).to_contain_text("drop: ", timeout=10_000)
                expect(page.locator("#subscribers")).to_contain_text("no subscribers", timeout=15_000)
            finally:
                browser.close()
    finally:
        sub.close()
        log = "".join(r.stderr_lines())
    assert "management write /api/connections/close refused: viewer is not in group admin" in log
    assert "management: ops closed connection" in log and "ops-pw" not in log
