"""Every lab notebook in a real browser, and Chinese text rendered as glyphs, not boxes.

JupyterLab runs headless on 127.0.0.1 over a copy of labs/ (so autosave never touches the committed
notebooks); Debian's Chromium, driven by Playwright (`executable_path`, no browser download),
opens each notebook, runs all cells, then clicks a fault button of the notebook's main widget
("kill broker-…", else the first "kill …", else the HA stepper's "deliver next") and checks that
the role display (`.rmqlab-roles`) and a plotly figure change. Screenshots of each notebook and of
its main widget go to test-artifacts/browser/ (RMQLAB_ARTIFACTS overrides). The README's test
command installs Chromium when it is missing; this test never skips.

The labs and the demo report quote Chinese design documents. Without a CJK font Chromium draws
every such character as the same empty box, and a page that "loads" says nothing: the CJK checks
draw each character of a quotation in the element's own font (a canvas, the font the page
declares, its fallbacks included) and require different glyphs, not one box repeated.
"""

from __future__ import annotations

import glob
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.process_helpers import stop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LABS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(os.environ.get("RMQLAB_BROWSER_LABS", os.path.join(ROOT, "labs")), "*.ipynb")))
CHROMIUM = os.environ.get("RMQLAB_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = os.environ.get("RMQLAB_ARTIFACTS", os.path.join(ROOT, "test-artifacts"))
# The flags this machine's headless Chromium needs: no sandbox as root, no GPU, and
# none of the background connections a closed network refuses.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
RUN_ALL_TIMEOUT_S = 400   # a lab runs in ≤ 60 s headless; the browser, JupyterLab and the other pytest worker on 2 cores add to it (lab 01 neared 240 s)
CLICK_TIMEOUT_S = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """A JupyterLab server on a copy of labs/: (base url, token); stopped by PID at the end."""
    assert os.path.exists(CHROMIUM), (f"{CHROMIUM} is missing: the README's test command installs Debian's chromium "
                                      "(apt-get install -y chromium); RMQLAB_CHROMIUM names another binary")
    tmp = tmp_path_factory.mktemp("jupyterlab")
    root = tmp / "labs"
    shutil.copytree(os.environ.get("RMQLAB_BROWSER_LABS", os.path.join(ROOT, "labs")), root)
    port, token = _free_port(), secrets.token_hex(16)
    # User settings of our own: no "get notified about Jupyter news?" toast over the screenshots.
    settings = tmp / "settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false"}')
    # Every cell rendered, not only those on screen (JupyterLab's windowing would leave the buttons of
    # off-screen cells without text).
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        '{"windowingMode": "none"}')
    env = {**os.environ, "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"), "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(settings)}
    log = open(tmp / "jupyterlab.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
                             "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
                             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
                             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(tmp))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, f"JupyterLab exited: {open(tmp / 'jupyterlab.log').read()[-2000:]}"
            assert time.monotonic() < deadline, "JupyterLab did not answer within 60 s"
            time.sleep(0.5)
        yield base, token
    finally:
        stop(proc, grace_s=15)
        log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1800})
        try:
            yield context
        finally:
            context.close()


_PLOTS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(p => {
    let h = 0; const s = p.innerHTML;
    for (let i = 0; i < s.length; i++) { h = (h * 31 + s.charCodeAt(i)) | 0; }
    return s.length + ':' + h; }).join(',')"""
_PROMPTS_JS = """() => Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
    .map(p => p.textContent.trim())"""


# Each character of `text` drawn alone on a canvas in `family` (the element's computed font-family,
# fallbacks included): a digest of its pixels, or "" when it drew nothing.
_GLYPHS_JS = """([text, family]) => Array.from(text).map(ch => {
    const c = document.createElement('canvas'); c.width = 64; c.height = 64;
    const g = c.getContext('2d'); g.font = '40px ' + family;
    g.textBaseline = 'top'; g.fillStyle = '#000'; g.fillText(ch, 4, 4);
    const px = g.getImageData(0, 0, 64, 64).data; let h = 0, ink = 0;
    for (let i = 3; i < px.length; i += 4) { if (px[i]) { ink++; } h = (h * 31 + px[i]) | 0; }
    return ink ? ink + ':' + h : ''; })"""
CJK_SAMPLE = "消息无延迟"  # "messages without delay": five different characters


def cjk_glyphs(page, selector: str, text: str = CJK_SAMPLE) -> list[str]:
    """The pixel digests of `text`'s characters drawn in the font-family of `selector`'s element."""
    family = page.eval_on_selector(selector, "e => getComputedStyle(e).fontFamily")
    return page.evaluate(_GLYPHS_JS, [text, family])


def assert_cjk_renders(page, selector: str, text: str = CJK_SAMPLE) -> None:
    glyphs = cjk_glyphs(page, selector, text)
    font = page.eval_on_selector(selector, "e => getComputedStyle(e).fontFamily")
    assert all(glyphs), f"{selector}: some of {text!r} drew nothing in {font}"
    assert len(set(glyphs)) == len(set(text)), (f"{selector}: {text!r} drew {len(set(glyphs))} different glyphs "
                                                 f"for {len(set(text))} characters in {font}: boxes, no CJK font")


@pytest.mark.browser
def test_chinese_quotations_in_the_demo_report_render_as_glyphs(browser, tmp_path):
    """The report's font stack, in Debian's Chromium: the seed's Chinese renders (fonts-noto-cjk)."""
    import types

    from rmqlab.demo.report import write_report

    f = types.SimpleNamespace(seed=7, crashed="broker-n0", new_master="broker-n1", elected_after_ms=10_000.0,
                              first_ack_after_ms=12_000.0, acknowledged=1, unknown=0, in_flight=0, checks={},
                              run=types.SimpleNamespace(events=[]))
    path = write_report([], str(tmp_path / "report.html"), failover=f)
    html = open(path, encoding="utf-8").read().replace("</body>", f"<p id='cjk'>「{CJK_SAMPLE}」</p></body>")
    page = browser.new_page()
    try:
        page.set_content(html)
        assert "Noto Sans CJK SC" in page.eval_on_selector("#cjk", "e => getComputedStyle(e).fontFamily")
        assert_cjk_renders(page, "#cjk")
    finally:
        page.close()


def _roles(page) -> str:
    return "\n".join(page.locator(".rmqlab-roles").all_inner_texts())


def _fault_button(labels: list[str], roles: str) -> int | None:
    """The button to click: "kill <the master>" (a node the role display shows up and a master),
    else "kill" of any node shown up, else the stepper's "deliver next". The notebook's own cells
    may already have killed some nodes: killing those again would change nothing."""
    states = dict(line.split("\t", 1) for line in roles.splitlines() if "\t" in line)
    up = {node for node, state in states.items() if not state.startswith("down")}
    kills = [(i, label.removeprefix("kill ")) for i, label in enumerate(labels) if label.startswith("kill ")]
    for wanted in (lambda n: n in up and "MASTER" in states[n], lambda n: n in up):
        found = next((i for i, node in kills if wanted(node)), None)
        if found is not None:
            return found
    return next((i for i, label in enumerate(labels) if label == "deliver next"), None)


def _stop_kernels(base: str, token: str) -> None:
    """Shut down the kernels a notebook started (the next one gets the machine to itself)."""
    import json

    with urllib.request.urlopen(f"{base}/api/kernels?token={token}", timeout=10) as r:
        kernels = json.load(r)
    for k in kernels:
        request = urllib.request.Request(f"{base}/api/kernels/{k['id']}?token={token}", method="DELETE")
        urllib.request.urlopen(request, timeout=30).close()


def _wait(predicate, timeout_s: float, what: str, page) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            page.screenshot(path=os.path.join(ARTIFACTS, "browser", f"timeout-{int(time.time())}.png"), full_page=True)
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        page.wait_for_timeout(500)


@pytest.mark.browser
@pytest.mark.real
@pytest.mark.parametrize("notebook", LABS)
def test_lab_runs_and_its_fault_button_updates_the_widget(notebook, jupyterlab, browser):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    base, token = jupyterlab
    out = os.path.join(ARTIFACTS, "browser")
    os.makedirs(out, exist_ok=True)
    stem = notebook.removesuffix(".ipynb")
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        # A workspace of its own, reset: no tab of an earlier notebook comes back.
        page.goto(f"{base}/lab/workspaces/{stem}/tree/{notebook}?token={token}&reset")
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=60_000)
        # JupyterLab may ask which kernel to start (the notebook's own, preselected): accept it.
        select = page.locator(".jp-Dialog button", has_text=re.compile(r"^Select$"))
        try:
            select.wait_for(timeout=10_000)
            select.click()
        except PlaywrightTimeout:
            pass
        # The kernel must be idle before "Run All Cells".
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        # Every code cell has run: its prompt shows an execution count, none is "[*]" or empty.
        _wait(lambda: all(re.fullmatch(r"\[\d+\]:", p) for p in page.evaluate(_PROMPTS_JS)), RUN_ALL_TIMEOUT_S,
              "every cell to run", page)
        text = "\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())
        assert "Traceback" not in text, f"{notebook}: a cell failed in the browser: {text[-3000:]}"
        # The notebook's Chinese quotations (its first rendered markdown that has one) are glyphs.
        quoted = page.locator(".jp-RenderedMarkdown :is(p, li, td)", has_text=re.compile("[\u4e00-\u9fff]")).first
        if quoted.count():
            quote = re.search("[\u4e00-\u9fff]+", quoted.inner_text()).group(0)
            quoted.evaluate("e => e.setAttribute('data-rmqlab-cjk', '1')")
            assert_cjk_renders(page, "[data-rmqlab-cjk]", quote[:8])
        page.screenshot(path=os.path.join(out, f"{stem}.png"), full_page=True)

        buttons = page.locator("button.jupyter-button")
        labels = [label.strip() for label in buttons.evaluate_all("bs => bs.map(b => b.textContent)")]
        choice = _fault_button(labels, _roles(page))
        assert choice is not None, f"{notebook}: no fault or stepper button among {labels[:20]}"
        button = buttons.nth(choice)
        button.scroll_into_view_if_needed()
        roles_before, plots_before = _roles(page), page.evaluate(_PLOTS_JS)
        assert roles_before.strip(), f"{notebook}: no .rmqlab-roles display rendered"
        assert plots_before, f"{notebook}: no plotly figure rendered"
        button.click()
        _wait(lambda: _roles(page) != roles_before, CLICK_TIMEOUT_S, f"the role display to change after {labels[choice]!r}", page)
        _wait(lambda: page.evaluate(_PLOTS_JS) != plots_before, CLICK_TIMEOUT_S, f"a figure to change after {labels[choice]!r}", page)
        widget = button.locator("xpath=ancestor::div[contains(@class,'jp-OutputArea-output')][1]")
        widget.screenshot(path=os.path.join(out, f"{stem}-widget.png"))
        assert not errors, f"{notebook}: JavaScript errors: {errors[:3]}"
    finally:
        page.close()
        _stop_kernels(base, token)
