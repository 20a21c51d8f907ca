"""The web app end to end: headless Chromium (Debian's ``chromium``, driven by Playwright)
against a real ``sleuth serve`` on loopback holding the statutes collection (the BNS).

Asks 'What is the punishment for murder?', checks that steps appear before the answer, that
the answer cites BNS_S103 and that clicking the citation shows the section's text and its
place in the outline; then reopens the run from the past-runs list on a phone-sized screen.
Then holds a conversation: starts a thread, asks about theft, follows up ('And what if it is
attempted?'), and checks both turns, the follow-up's standalone rewrite and the citations.
Screenshots go to ``test-artifacts/web-e2e/`` (or ``$SLEUTH_TEST_ARTIFACTS/web-e2e``).

Skipped when ``/usr/bin/chromium`` (``apt-get install chromium``), the ``playwright`` Python
package or the statutes data are missing, unless ``SLEUTH_WEB_TESTS=1``, which makes a
missing browser or package a failure. ``playwright install`` is not needed.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BNS = ROOT.parent / "shared" / "data" / "statutes" / "the_bharatiya_nyaya_sanhita_2023.json"
CHROMIUM = Path(os.environ.get("SLEUTH_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(os.environ.get("SLEUTH_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "web-e2e"
QUESTION = "What is the punishment for murder?"
THREAD_QUESTION = "What is the punishment for theft?"
FOLLOW_UP = "And what if it is attempted?"

# records when each part of the page first appears (ms since navigation)
OBSERVER = """
window.__seen = {};
new MutationObserver(() => {
  const now = performance.now();
  for (const [name, sel] of [["step", ".step"], ["running", ".running"],
                             ["answer", ".answer"], ["done", ".step-done"]]) {
    if (!(name in window.__seen) && document.querySelector(sel)) window.__seen[name] = now;
  }
}).observe(document, { childList: true, subtree: true });
"""

# The heuristic agent answers in ~0.1 s: to see (and photograph) the running state, the
# page's copy of the event stream is paced, one SSE message per STEP_DELAY_MS, in the page
# itself; the server and its stream are untouched.
PACER = r"""
const STEP_DELAY_MS = 250;
const realFetch = window.fetch.bind(window);
window.fetch = async (input, init) => {
  const response = await realFetch(input, init);
  const url = typeof input === "string" ? input : input.url;
  if (!url.endsWith("/stream") || !response.body) return response;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let pending = "";
  const body = new ReadableStream({
    async pull(controller) {
      for (;;) {
        const cut = pending.indexOf("\r\n\r\n") >= 0 ? pending.indexOf("\r\n\r\n") + 4
          : pending.indexOf("\n\n") >= 0 ? pending.indexOf("\n\n") + 2 : -1;
        if (cut >= 0) {
          await new Promise((ok) => setTimeout(ok, STEP_DELAY_MS));
          controller.enqueue(encoder.encode(pending.slice(0, cut)));
          pending = pending.slice(cut);
          return;
        }
        const { value, done } = await reader.read();
        if (done) {
          if (pending) controller.enqueue(encoder.encode(pending));
          controller.close();
          return;
        }
        pending += decoder.decode(value, { stream: true });
      }
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
};
"""


def _require() -> None:
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    if importlib.util.find_spec("playwright") is None:
        missing.append("the playwright package is missing (pip install playwright)")
    if missing:
        if os.environ.get("SLEUTH_WEB_TESTS") == "1":
            pytest.fail("SLEUTH_WEB_TESTS=1 but " + "; ".join(missing))
        pytest.skip("; ".join(missing))
    if not BNS.is_file():
        pytest.skip(f"statutes data not found at {BNS}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``sleuth serve`` over a data dir holding 'statutes' (the BNS, real embedder), owned
    by a user whose key is returned with the base URL."""
    _require()
    from sleuth.api.keys import create_user
    from sleuth.app import Sleuth
    from sleuth.config import Settings

    data = tmp_path_factory.mktemp("web-e2e")
    settings = Settings(data_dir=data / "data", llm="heuristic")
    sleuth = Sleuth(settings)
    try:
        sleuth.pipeline.ingest([BNS], "statutes")  # read in place, not copied
        info = sleuth.catalog.get_collection("statutes")
        assert info is not None and info.n_chunks > 0
        user, key = create_user(sleuth.catalog, "e2e")
        sleuth.catalog.set_collection_owner("statutes", user.id)
    finally:
        sleuth.close()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env.update(SLEUTH_DATA_DIR=str(data / "data"), SLEUTH_LLM="heuristic")
    log = (data / "serve.log").open("w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("sleuth")), "serve", "--port", str(port)],
        env=env,
        cwd=data,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{url}/health", timeout=2)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("sleuth serve did not start:\n" + (data / "serve.log").read_text())
                time.sleep(0.3)
        yield url, key
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    _require()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),  # a fresh --user-data-dir
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1366, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


def test_ask_stream_steps_answer_and_open_the_cited_section(
    server: tuple[str, str], browser_context: Any
) -> None:
    url, key = server
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser_context.new_page()
    page.add_init_script(OBSERVER)
    page.add_init_script(PACER)
    failed: list[str] = []
    page.on("requestfailed", lambda r: failed.append(r.url))
    outside: list[str] = []
    page.on("request", lambda r: r.url.startswith(url) or outside.append(r.url))

    page.goto(url)
    page.get_by_label("API key", exact=True).fill(key)
    page.get_by_role("button", name="Save key").click()
    page.wait_for_selector("#collection option[value='statutes']", state="attached")
    page.get_by_label("Question", exact=True).fill(QUESTION)
    page.get_by_role("radio", name="react").check()
    page.get_by_role("button", name="Ask", exact=True).click()

    page.wait_for_selector(".step:nth-child(5)", timeout=60_000)
    assert page.locator(".running").is_visible(), "no running indicator while steps stream"
    assert page.locator(".answer").count() == 0
    page.screenshot(path=str(ARTIFACTS / "running.png"), full_page=True)

    page.wait_for_selector(".step-done", timeout=120_000)
    seen = page.evaluate("window.__seen")
    assert "step" in seen and "answer" in seen, seen
    assert seen["step"] < seen["answer"], f"the answer came before any step: {seen}"
    assert "running" in seen, "no running indicator was shown"
    assert page.locator(".running").count() == 0
    kinds = page.locator(".step").evaluate_all("els => els.map(e => e.dataset.kind)")
    assert "tool_call" in kinds and "tool_result" in kinds and kinds[-1] == "done", kinds
    assert page.locator(".finished").inner_text().startswith("Finished in")

    cite = page.locator('.answer-text button.cite[data-source-id="BNS_S103"]').first
    assert cite.is_visible(), page.locator(".answer").inner_text()
    page.screenshot(path=str(ARTIFACTS / "finished.png"), full_page=True)

    cite.focus()
    page.keyboard.press("Enter")  # keyboard, not only the mouse
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    text = page.get_by_test_id("section-text")
    text.wait_for()
    page.wait_for_selector(".outline [aria-current]")
    assert "Whoever commits murder shall be punished with death" in text.inner_text()
    assert "103" in dialog.locator("[aria-current]").inner_text()
    page.screenshot(path=str(ARTIFACTS / "citation.png"), full_page=True)
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")

    assert not failed, f"requests failed: {failed}"
    assert not outside, f"the page fetched from elsewhere: {outside}"
    page.close()


def test_a_past_run_reopens_on_a_phone_sized_screen(
    server: tuple[str, str], browser_context: Any
) -> None:
    url, _ = server
    page = browser_context.new_page()  # same profile: the key is kept in the browser
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(url)
    run = page.locator(".run-item", has_text=QUESTION).first
    run.wait_for(timeout=30_000)
    run.click()
    page.wait_for_selector(".step-done", timeout=60_000)
    assert page.locator('.answer-text button.cite[data-source-id="BNS_S103"]').count() >= 1
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways on a phone ({width}px)"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "phone-reopened.png"), full_page=True)
    page.close()


def test_a_conversation_with_a_follow_up_made_standalone(
    server: tuple[str, str], browser_context: Any
) -> None:
    url, key = server
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser_context.new_page()
    page.add_init_script(PACER)
    failed: list[str] = []
    page.on("requestfailed", lambda r: failed.append(r.url))
    outside: list[str] = []
    page.on("request", lambda r: r.url.startswith(url) or outside.append(r.url))

    page.goto(url)
    page.get_by_label("API key", exact=True).fill(key)  # also when this test runs alone
    page.get_by_role("button", name="Save key").click()
    page.wait_for_selector("#collection option[value='statutes']", state="attached")
    page.get_by_role("button", name="New conversation").click()
    page.get_by_label("First question", exact=True).fill(THREAD_QUESTION)
    page.get_by_role("button", name="Send", exact=True).click()

    conversation = page.locator(".conversation")
    turns = conversation.locator(".turn:not(.pending)")
    turns.first.wait_for(timeout=120_000)
    first = turns.nth(0)
    assert THREAD_QUESTION in first.locator(".turn-question").inner_text()
    assert first.locator(".searched-as").count() == 0  # a first turn is asked as typed
    assert first.locator("button.cite[data-source-id^='BNS_']").count() >= 1, first.inner_text()
    page.wait_for_selector(".step-done", timeout=60_000)

    page.get_by_label("Follow-up question", exact=True).fill(FOLLOW_UP)
    page.get_by_role("button", name="Send", exact=True).click()
    # while it runs: the question waits as a pending turn, with the rewrite it is searched as
    pending = conversation.locator(".turn.pending .searched-as")
    pending.wait_for(timeout=60_000)
    assert "attempt" in pending.inner_text().lower(), pending.inner_text()
    assert page.locator(".step-followup").first.is_visible()
    page.screenshot(path=str(ARTIFACTS / "conversation-running.png"), full_page=True)

    page.wait_for_function(
        "document.querySelectorAll('.conversation .turn:not(.pending)').length === 2",
        timeout=120_000,
    )
    page.wait_for_selector(".step-done", timeout=60_000)
    second = turns.nth(1)
    assert FOLLOW_UP in second.locator(".turn-question").inner_text()
    searched_as = second.locator(".searched-as").inner_text()
    assert searched_as.startswith("searched as:") and searched_as != f"searched as: {FOLLOW_UP}"
    rewrite = page.locator(".step-followup").inner_text()
    assert "Searched as:" in rewrite and "attempted" in rewrite, rewrite
    cites = second.locator(".turn-sources button.cite[data-source-id^='BNS_']")
    assert cites.count() >= 1, second.inner_text()
    assert page.locator(".answer-text button.cite[data-source-id^='BNS_']").count() >= 1
    thread_item = page.locator(".thread-item", has_text=THREAD_QUESTION)
    assert "2 turns" in thread_item.inner_text()
    page.screenshot(path=str(ARTIFACTS / "conversation.png"), full_page=True)

    source_id = cites.first.get_attribute("data-source-id")
    cites.first.click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    page.wait_for_selector(".outline [aria-current]")
    assert source_id and source_id.split("_S")[-1] in dialog.locator("[aria-current]").inner_text()
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")

    # deleted from the list: gone, and the page is back to single questions
    page.get_by_role("button", name=f"Delete the conversation {THREAD_QUESTION}").click()
    page.locator(".thread-row").get_by_role("button", name="Delete", exact=True).click()
    thread_item.wait_for(state="detached")
    page.get_by_label("Question", exact=True).wait_for()
    assert not failed, f"requests failed: {failed}"
    assert not outside, f"the page fetched from elsewhere: {outside}"
    page.close()
