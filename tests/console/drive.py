"""Drives the console in headless Chromium (the distribution's, through
Playwright for Python) for tests/console. One scenario per
run; it talks to the Rust test over stdin and stdout, one JSON object a
line: {"ask": ...} waits for the test to act and answer a line, and the
last line is {"result": ...}.

    drive.py CHROMIUM URL SCREENSHOT_DIR SCENARIO JSON_ARGS
"""

import json
import sys
import time
import urllib.request

from playwright.sync_api import sync_playwright

CHROMIUM, URL, SHOTS, SCENARIO = sys.argv[1:5]
ARGS = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}


def say(obj):
    print(json.dumps(obj), flush=True)


def ask(what, **more):
    """Asks the test to act, and waits until it has."""
    say({"ask": what, **more})
    return json.loads(sys.stdin.readline() or "null")


def shot(page, name):
    page.screenshot(path=f"{SHOTS}/{name}.png", full_page=True)


def login(page, token):
    page.goto(f"{URL}/ui")
    page.wait_for_selector("#token-form")
    page.fill("#token", token)
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("#nav:not([hidden])")


CALENDAR_JS = """() => {
  const svg = document.getElementById('calendar-svg');
  const num = (e, a) => Number(e.getAttribute(a));
  return {
    start: svg.dataset.start, end: svg.dataset.end,
    left: Number(svg.dataset.left), right: Number(svg.dataset.right),
    top: Number(svg.dataset.top), row: Number(svg.dataset.row),
    rows: [...svg.querySelectorAll('text.host')].map((t) => t.firstChild.nodeValue),
    bars: [...svg.querySelectorAll('g.bar')].map((g) => {
      const r = g.querySelector('rect');
      // The name as the bar's hover text has it (a narrow bar's label is cut).
      return { label: g.querySelector('title').textContent.split('\\n')[0], cls: g.getAttribute('class'),
               x: num(r, 'x'), y: num(r, 'y'), width: num(r, 'width') };
    }),
    now_line: !!document.getElementById('now-line'),
  };
}"""


def calendar(page):
    """The calendar of one day as the token sees it: its geometry and text."""
    login(page, ARGS["token"])
    page.goto(f"{URL}/ui#calendar/{ARGS['day']},{ARGS.get('zoom', 'day')}")
    page.wait_for_selector("#calendar-svg")
    page.wait_for_function("(n) => document.querySelectorAll('#calendar-svg g.bar').length >= n", arg=ARGS["bars"])
    shot(page, ARGS["shot"])
    geometry = page.evaluate(CALENDAR_JS)
    # Every page the member can open, for names that must not be there.
    texts, html = [page.inner_text("body")], [page.content()]
    for where, wait in ARGS.get("also", []):
        page.goto(f"{URL}/ui#{where}")
        page.wait_for_selector(wait)
        page.wait_for_timeout(300)
        texts.append(page.inner_text("body"))
        html.append(page.content())
    return {"geometry": geometry, "text": "\n".join(texts), "html": "\n".join(html)}


def pages(page):
    """A screenshot of each page, with what it shows."""
    page.goto(f"{URL}/ui")
    page.wait_for_selector("#token-form")
    shot(page, "login")
    login(page, ARGS["token"])
    out = {}
    for name, where, wait in ARGS["pages"]:
        page.goto(f"{URL}/ui#{where}")
        page.wait_for_selector(wait)
        page.wait_for_timeout(500)
        shot(page, name)
        out[name] = page.inner_text(f"section#{where.split('/')[0]}")
    return out


def put(path, token):
    req = urllib.request.Request(f"{URL}{path}", method="PUT", headers={
        "x-auth-token": token, "openstack-api-version": "placement 1.39"})
    urllib.request.urlopen(req).read()


# Functions, not expressions: the console's CSP forbids the eval an expression needs.
SHOWN = "(text) => document.querySelector('#log-table tbody').innerText.includes(text)"


def live(page):
    """A new entry shows on the live page within 2 s; after the server
    restarts, the page reconnects and resumes after its cursor."""
    login(page, ARGS["token"])
    page.goto(f"{URL}/ui#log")
    page.wait_for_selector("#log-state.ok")
    name = ARGS["class"]
    started = time.monotonic()
    put(f"/placement/resource_classes/{name}", ARGS["token"])
    page.wait_for_function(SHOWN, arg=name, timeout=2000, polling=50)
    seen_after = time.monotonic() - started
    shot(page, "live-log-new-entry")
    before = page.evaluate("() => [...document.querySelectorAll('#log-table tr.entry')].map((r) => r.dataset.cursor)")
    after_restart = ask("restart")["class"]
    page.wait_for_function(SHOWN, arg=after_restart, timeout=20000, polling=100)
    cursors = page.evaluate("() => [...document.querySelectorAll('#log-table tr.entry')].map((r) => r.dataset.cursor)")
    return {"seconds": seen_after, "before": before, "cursors": cursors, "state": page.inner_text("#log-state")}


def manager(page):
    """Retries a failed lease event from the Manager page."""
    login(page, ARGS["token"])
    page.goto(f"{URL}/ui#manager")
    button = f"#manager-failed button.act-retry[data-event='{ARGS['event']}']"
    page.wait_for_selector(button)
    shot(page, "manager")
    page.click(button)
    page.wait_for_selector(button, state="detached", timeout=10000)
    return {"text": page.inner_text("section#manager")}


def password_login(page):
    """Logs in with user, password and project (berthd asks Keystone)."""
    page.goto(f"{URL}/ui")
    page.wait_for_selector("#password-form:not([hidden])")
    page.fill("#login-user", ARGS["user"])
    page.fill("#login-password", ARGS["password"])
    page.fill("#login-project", ARGS["project"])
    shot(page, "login-keystone")
    page.click("#password-form button[type=submit]")
    page.wait_for_selector("#nav:not([hidden])")
    page.wait_for_selector("#calendar-svg, #cal-chart p.empty")
    return {
        "who": page.inner_text("#who"),
        "session": page.evaluate("() => Object.keys(sessionStorage)"),
        "local": page.evaluate("() => Object.keys(localStorage)"),
        "cookies": page.context.cookies(),
        "password_left": page.input_value("#login-password"),
    }


def main():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        # A refusal the page shows (403 to a member, 404 for a missing
        # route) is logged by Chromium as a failed load: not a script error.
        page.on("console", lambda m: errors.append(m.text)
                if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
        try:
            result = {"calendar": calendar, "pages": pages, "live": live, "manager": manager,
                      "password_login": password_login}[SCENARIO](page)
        except Exception:
            shot(page, f"failed-{SCENARIO}")
            raise
        finally:
            browser.close()
        say({"result": result, "errors": errors})


main()
