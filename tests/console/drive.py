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
    """Keeps a screenshot; those of a run logged in through Keystone (user,
    password and project) are named apart from the noauth run's."""
    mode = "-keystone" if isinstance(ARGS.get("login"), dict) else ""
    page.screenshot(path=f"{SHOTS}/{name}{mode}.png", full_page=True)


def login(page, who, at=""):
    """Logs in with a token, or with {"user", "password", "project"} (keystone),
    to the page `at` (else the calendar), drawn once: no earlier drawing of
    another window can be read by mistake."""
    page.goto(f"{URL}/ui{'#' + at if at else ''}")
    page.wait_for_selector("#token-form")
    if isinstance(who, dict):
        page.wait_for_selector("#password-form:not([hidden])")
        page.fill("#login-user", who["user"])
        page.fill("#login-password", who["password"])
        page.fill("#login-project", who["project"])
        page.click("#password-form button[type=submit]")
    else:
        page.fill("#token", who)
        page.click("#token-form button[type=submit]")
    page.wait_for_selector("#nav:not([hidden])")


def confirm(page, yes):
    """Answers the console's confirmation; returns what it asked."""
    page.wait_for_selector("#confirm[open]")
    text = page.inner_text("#confirm-text")
    page.click("#confirm-yes" if yes else "#confirm-no")
    page.wait_for_selector("#confirm", state="hidden")
    return text


def nav(page):
    """The page links shown to the caller."""
    return page.evaluate("() => [...document.querySelectorAll('#nav a')].filter((a) => !a.hidden).map((a) => a.dataset.page)")


def shown(page, selector):
    """Whether an element is in the page and not hidden."""
    return page.locator(selector).count() > 0 and page.locator(selector).first.is_visible()


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
    # Once the page knows the ways in (GET /v1/login), noauth shows no password form.
    page.wait_for_load_state("networkidle")
    out = {"password_form_shown": shown(page, "#password-form")}
    shot(page, "login")
    login(page, ARGS["token"])
    for name, where, wait in ARGS["pages"]:
        page.goto(f"{URL}/ui#{where}")
        page.wait_for_selector(wait)
        page.wait_for_timeout(500)
        shot(page, name)
        out[name] = page.inner_text(f"section#{where.split('/')[0]}")
    out["quota_drawing"] = page.evaluate(QUOTA_JS)
    return out


QUOTA_JS = """() => [...document.querySelectorAll('#quota-charts svg.quota')].map((svg) => ({
  project: svg.dataset.project, width: Number(svg.getAttribute('width')),
  bars: [...svg.querySelectorAll('g.peak, g.inuse')].map((g) => g.dataset.resource),
  unlimited: [...svg.querySelectorAll('line.unlimited')].map((l) => l.dataset.resource),
  text_right: Math.max(...[...svg.querySelectorAll('text')].map((t) => { const b = t.getBBox(); return b.x + b.width; })),
}))"""


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
    page.goto(f"{URL}/ui#lease/{ARGS['lease']}")
    page.wait_for_selector("#lease-title:not(:empty)")
    recover = shown(page, "#lease-recover")
    page.goto(f"{URL}/ui#manager")
    button = f"#manager-failed button.act-retry[data-event='{ARGS['event']}']"
    page.wait_for_selector(button)
    shot(page, "manager")
    page.click(button)
    asked = confirm(page, True)
    page.wait_for_selector(button, state="detached", timeout=10000)
    return {"text": page.inner_text("section#manager"), "asked": asked, "recover_shown": recover}


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


def fill_lease(page, a):
    page.wait_for_selector("#new-type option", state="attached")
    page.fill("#new-name", a["name"])
    page.select_option("#new-type", "physical:host")
    page.fill("#new-hosts", a["host"])
    page.fill("#new-start", a["start"])
    page.fill("#new-end", a["end"])


def lease_controls(page):
    return {c: shown(page, f"#{c}") for c in ["lease-end", "lease-recover", "lease-delete", "lease-change"]}


def lease_flow(page):
    """A member makes a lease through the form, changes its end both ways
    and deletes it; each is first declined, then confirmed."""
    login(page, ARGS["login"])
    out = {"nav": nav(page), "manager_label": page.inner_text("#nav a[data-page=manager]")}
    page.goto(f"{URL}/ui#calendar/{ARGS['start'][:10]},day")
    page.wait_for_selector("#calendar-svg")
    out["host_links"] = page.locator("#calendar-svg text.link").count()
    page.goto(f"{URL}/ui#host/{ARGS['host_id']}")
    page.wait_for_selector("#calendar-svg")
    out["host_page_shown"] = shown(page, "section#host")
    # Bad input goes to the API, whose message the form shows.
    page.goto(f"{URL}/ui#new")
    fill_lease(page, ARGS)
    page.fill("#new-properties", '["==", "$gpu"')
    page.click("#new-submit")
    confirm(page, True)
    page.wait_for_selector("#new-error:not(:empty)")
    out["refused"] = page.inner_text("#new-error")
    ask("refused")
    page.fill("#new-properties", "")
    asks = []
    page.on("request", lambda r: asks.append(r) if r.url.endswith("/v1/availability") else None)
    page.click("#new-check")
    page.wait_for_selector("#new-fits[data-fits=true]")
    # Past the form's 300 ms debounce: the field's change, made as the
    # button was clicked, must not ask again after the button has.
    time.sleep(0.6)
    out["advice_asks"] = len(asks)
    out["advice"] = page.inner_text("#new-fits")
    shot(page, "lease-new")
    page.click("#new-submit")
    out["create_asked"] = confirm(page, False)
    ask("not_confirmed")
    page.click("#new-submit")
    confirm(page, True)
    page.wait_for_function("(n) => document.getElementById('lease-title').textContent === n", arg=ARGS["name"])
    lease = page.url.split("#lease/")[1]
    out["controls"] = lease_controls(page)
    shot(page, "lease-member")
    ask("created", lease=lease)
    for step, when, yes in [("prolong_kept", ARGS["later"], False), ("prolonged", ARGS["later"], True),
                            ("shortened", ARGS["earlier"], True)]:
        page.fill("#lease-new-end", when)
        page.click("#lease-change-end")
        out[f"{step}_asked"] = confirm(page, yes)
        if yes:
            page.wait_for_function("(w) => [...document.querySelectorAll('#lease-fields dd')].some((d) => d.textContent === w)",
                                   arg=when.replace("T", " "))
        ask(step)
    # The Manager page lists the member's waiting events, with no control.
    page.goto(f"{URL}/ui#manager")
    page.wait_for_selector("#manager-due tbody tr td a")
    page.wait_for_timeout(300)
    out["manager_buttons"] = page.locator("section#manager button:visible").count()
    out["manager_panel"] = shown(page, "#manager-state")
    shot(page, "manager-member")
    page.goto(f"{URL}/ui#lease/{lease}")
    page.wait_for_selector("#lease-delete")
    page.click("#lease-delete")
    out["delete_asked"] = confirm(page, False)
    ask("delete_kept")
    page.click("#lease-delete")
    confirm(page, True)
    page.wait_for_function("() => location.hash === '#leases'")
    ask("deleted")
    return out


def admin_controls(page):
    """An admin's lease page and Manager page: the controls shown, and a
    declined End now and Cancel that change nothing."""
    login(page, ARGS["login"])
    out = {"nav": nav(page), "manager_label": page.inner_text("#nav a[data-page=manager]")}
    page.goto(f"{URL}/ui#lease/{ARGS['lease']}")
    page.wait_for_selector("#lease-title:not(:empty)")
    out["controls"] = lease_controls(page)
    shot(page, "lease-admin")
    page.click("#lease-end")
    out["end_asked"] = confirm(page, False)
    page.goto(f"{URL}/ui#manager")
    button = f"#manager-due button.act-cancel[data-event='{ARGS['event']}']"
    page.wait_for_selector(button)
    out["fire_shown"] = shown(page, f"#manager-due button.act-fire[data-event='{ARGS['event']}']")
    out["summary"] = page.inner_text("#manager-state")
    page.click(button)
    out["cancel_asked"] = confirm(page, False)
    page.click(f"#manager-due button.act-fire[data-event='{ARGS['event']}']")
    out["fire_asked"] = confirm(page, False)
    ask("declined")
    return out


RANGE = "() => { const s = document.getElementById('calendar-svg'); return [s.dataset.start.slice(0, 10), s.dataset.end.slice(0, 10)]; }"


def navigate(page):
    """Zoom and steps keep the day in view; the chart fills the window."""
    login(page, ARGS["login"], f"calendar/{ARGS['day']},week")
    page.wait_for_selector("#calendar-svg")
    seen = [["week", page.evaluate(RANGE)]]
    for what, click in [("day", "[data-zoom=day]"), ("month", "[data-zoom=month]"), ("next", "#cal-next"),
                        ("day", "[data-zoom=day]"), ("week", "[data-zoom=week]"), ("next", "#cal-next"),
                        ("today", "#cal-today")]:
        before = page.evaluate(RANGE)
        page.click(click)
        page.wait_for_function(f"(b) => JSON.stringify(({RANGE})()) !== JSON.stringify(b)", arg=before)
        seen.append([what, page.evaluate(RANGE)])
    shot(page, "calendar-today")
    width = page.evaluate("() => [Number(document.getElementById('calendar-svg').getAttribute('width')), document.getElementById('cal-chart').clientWidth]")
    hours = page.locator("#calendar-svg text.axis.hour").count()
    page.set_viewport_size({"width": 1600, "height": 900})
    page.wait_for_function("() => Number(document.getElementById('calendar-svg').getAttribute('width')) > 1400")
    wide = page.evaluate("() => Number(document.getElementById('calendar-svg').getAttribute('width'))")
    colours = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('.legend span')].map((s) =>
      [s.className.replace('st-', ''), getComputedStyle(s).backgroundColor]))""")
    return {"seen": seen, "width": width, "wide": wide, "hours": hours, "colours": colours}


def select(page):
    """A drag along a host's row fills the new lease form; confirmed, it makes the lease."""
    login(page, ARGS["login"], f"calendar/{ARGS['day']},day")
    page.wait_for_selector("#calendar-svg")
    g = page.evaluate(CALENDAR_JS)
    row = g["rows"].index(ARGS["host"])
    box = page.locator("#calendar-svg").bounding_box()
    x = lambda h: box["x"] + g["left"] + (g["right"] - g["left"]) * h / 24
    y = box["y"] + g["top"] + row * g["row"] + g["row"] / 2
    page.mouse.move(x(ARGS["from"]), y)
    page.mouse.down()
    page.mouse.move(x((ARGS["from"] + ARGS["to"]) / 2), y, steps=4)
    page.mouse.move(x(ARGS["to"]), y, steps=4)
    shot(page, "calendar-selecting")
    page.mouse.up()
    page.wait_for_selector("#new-fits")
    form = {k: page.input_value(f"#new-{k}") for k in ["type", "hosts", "min", "max", "start", "end"]}
    form["fits"] = page.get_attribute("#new-fits", "data-fits")
    shot(page, "calendar-selection")
    page.fill("#new-name", ARGS["name"])
    page.click("#new-submit")
    confirm(page, True)
    page.wait_for_function("(n) => document.getElementById('lease-title').textContent === n", arg=ARGS["name"])
    return {"form": form, "lease": page.url.split("#lease/")[1]}


def host_admin(page):
    """An admin's host page: its own timeline, disable and enable, a maintenance window."""
    login(page, ARGS["login"])
    out = {"nav": nav(page), "manager_label": page.inner_text("#nav a[data-page=manager]")}
    page.goto(f"{URL}/ui#hosts")
    page.click(f"#host-table a[href='#host/{ARGS['host']}']")
    page.wait_for_function("(n) => document.getElementById('host-title').textContent === n", arg=ARGS["name"])
    out["listed"] = page.inner_text("#host-table")
    page.goto(f"{URL}/ui#host/{ARGS['host']}/{ARGS['day']}")
    page.wait_for_selector("#host-svg g.bar")
    out["bars"] = page.evaluate("() => [...document.querySelectorAll('#host-svg g.bar title')].map((t) => t.textContent.split('\\n')[0])")
    out["rows"] = page.evaluate("() => [...document.querySelectorAll('#host-svg text.host')].map((t) => t.firstChild.nodeValue)")
    shot(page, "host")
    out["toggle"] = page.inner_text("#host-toggle")
    page.click("#host-toggle")
    out["disable_asked"] = confirm(page, False)
    ask("disable_kept")
    page.click("#host-toggle")
    confirm(page, True)
    page.wait_for_selector("#host-outcome-title")
    page.wait_for_function("() => document.getElementById('host-toggle').textContent === 'Enable'")
    out["disabled_outcome"] = page.inner_text("#host-outcome")
    shot(page, "host-disabled")
    ask("disabled")
    page.click("#host-toggle")
    confirm(page, True)
    page.wait_for_function("() => document.getElementById('host-toggle').textContent === 'Disable'")
    ask("enabled")
    page.fill("#maint-start", ARGS["maint_start"])
    page.fill("#maint-end", ARGS["maint_end"])
    page.fill("#maint-reason", ARGS["reason"])
    page.click("#maint-create")
    out["maint_asked"] = confirm(page, True)
    page.wait_for_selector("#host-svg g.st-maintenance")
    out["maintenance"] = page.inner_text("#host-maintenance")
    shot(page, "host-maintenance")
    ask("maintenance")
    return out


OFFERS = "() => [...document.querySelectorAll('#new-offer-list li.offer')].map((li) => ({ id: li.dataset.offer, start: li.dataset.start, end: li.dataset.end, hosts: Number(li.dataset.hosts), text: li.innerText }))"


def offer_flow(page):
    """The asked window does not fit: the form lists offers; the member
    books one (first declined), then the same one again from the list as
    it was shown before that booking (a tab left open), and is refused."""
    login(page, ARGS["login"])
    # The form is ready once it has asked advice on its default window, the
    # last thing it does when shown (after reading the calendar): an ask
    # still to come would be counted as the button's.
    with page.expect_response(lambda r: r.url.endswith("/v1/availability")):
        page.goto(f"{URL}/ui#new")
    page.wait_for_selector("#new-type option", state="attached")
    page.fill("#new-name", ARGS["name"])
    page.select_option("#new-type", "physical:host")
    page.fill("#new-min", str(ARGS["min"]))
    page.fill("#new-max", str(ARGS["max"]))
    page.fill("#new-start", ARGS["start"])
    page.fill("#new-end", ARGS["end"])
    # Moving from field to field changed each one left, and each change
    # asks after the 300 ms debounce: let those asks go before counting.
    # The change of the field left for the button is still counted.
    time.sleep(1.0)
    advice, offers = [], []
    page.on("request", lambda r: advice.append(r) if r.url.endswith("/v1/availability") else None)
    page.on("request", lambda r: offers.append(r) if r.url.endswith("/v1/offers") else None)
    with page.expect_response(lambda r: r.url.endswith("/v1/offers")) as answered:
        page.click("#new-check")
    stale = answered.value.text()
    page.wait_for_selector("#new-offer-list li.offer")
    time.sleep(0.6)  # past the debounce: nothing asked again
    out = {"fits": page.get_attribute("#new-fits", "data-fits"), "advice_asks": len(advice),
           "offer_asks": len(offers), "offers": page.evaluate(OFFERS)}
    shot(page, "lease-offers")
    first = out["offers"][0]
    button = f"#new-offer-list li.offer[data-offer='{first['id']}'] button.book-offer"
    page.click(button)
    out["book_declined"] = confirm(page, False)
    ask("declined")
    page.click(button)
    out["book_asked"] = confirm(page, True)
    page.wait_for_function("(n) => document.getElementById('lease-title').textContent === n", arg=ARGS["name"])
    lease = page.url.split("#lease/")[1]
    ask("booked", lease=lease, offer=first)
    # The list as first shown, once more: its first offer is already booked.
    page.route("**/v1/offers", lambda route: route.fulfill(status=200, content_type="application/json", body=stale), times=1)
    page.goto(f"{URL}/ui#new")
    page.click(button)
    out["again_asked"] = confirm(page, True)
    page.wait_for_selector("#new-error:not(:empty)")
    out["refused"] = page.inner_text("#new-error")
    # The list is asked again: the booked offer is no longer in it.
    page.wait_for_selector(f"#new-offer-list li.offer[data-offer='{first['id']}']", state="detached")
    page.wait_for_selector("#new-offers-title")
    out["after"] = page.evaluate(OFFERS)
    out["still_new"] = page.url.endswith("#new")
    shot(page, "lease-offer-taken")
    ask("refused")
    return out


def zone_flow(page):
    """Times in the browser's zone: a lease's dates shown in it, the choice
    remembered, and the form's wall time sent in that zone."""
    login(page, ARGS["login"])
    out = {"options": page.evaluate("() => [...document.querySelectorAll('#zone option')].map((o) => o.textContent)"),
           "local_before": page.evaluate("() => Object.keys(localStorage)")}
    page.select_option("#zone", "local")
    out["local"] = page.evaluate("() => Object.keys(localStorage)")
    page.goto(f"{URL}/ui#lease/{ARGS['lease']}")
    page.wait_for_selector("#lease-title:not(:empty)")
    out["fields"] = page.inner_text("#lease-fields")
    out["new_end"] = page.input_value("#lease-new-end")
    page.goto(f"{URL}/ui#leases")
    page.wait_for_selector("#lease-table tbody tr td a")
    out["list"] = page.inner_text("#lease-table")
    page.goto(f"{URL}/ui#calendar/{ARGS['day']},day")
    page.wait_for_function("(d) => { const s = document.getElementById('calendar-svg'); return s && s.dataset.start.startsWith(d); }",
                           arg=ARGS["day"])
    out["calendar_range"] = page.inner_text("#cal-range")
    # Remembered: a reload keeps the choice.
    page.reload()
    page.wait_for_selector("#nav:not([hidden])")
    out["after_reload"] = page.input_value("#zone")
    page.goto(f"{URL}/ui#new")
    fill_lease(page, ARGS)
    page.click("#new-check")
    page.wait_for_selector("#new-fits")
    out["fits"] = page.get_attribute("#new-fits", "data-fits")
    out["form"] = page.inner_text("#new-form")
    shot(page, "lease-new-zone")
    page.click("#new-submit")
    out["asked"] = confirm(page, True)
    page.wait_for_function("(n) => document.getElementById('lease-title').textContent === n", arg=ARGS["name"])
    out["made_fields"] = page.inner_text("#lease-fields")
    ask("created", lease=page.url.split("#lease/")[1])
    return out


def share_flow(page):
    """The owner shares a lease with one project (first declined), then
    offers it to another."""
    login(page, ARGS["login"], f"lease/{ARGS['lease']}")
    page.wait_for_selector("#lease-share-box:not([hidden])")
    page.fill("#lease-share-projects", ARGS["share"])
    page.click("#lease-share")
    out = {"declined": confirm(page, False)}
    ask("declined")
    page.click("#lease-share")
    out["asked"] = confirm(page, True)
    page.wait_for_function("(p) => document.getElementById('lease-shared-with').textContent.includes(p)",
                           arg=ARGS["share"])
    out["shared"] = page.inner_text("#lease-shared-with")
    page.fill("#lease-transfer-project", ARGS["offer"])
    page.click("#lease-transfer")
    out["offer_asked"] = confirm(page, True)
    page.wait_for_selector("#lease-withdraw:not([hidden])")
    out["pending"] = page.inner_text("#lease-transfer-pending")
    shot(page, "lease-sharing")
    return out


def shared_list(page):
    """What the leases page shows a project of the leases shared with it."""
    login(page, ARGS["login"], "leases")
    page.wait_for_selector("#shared-table tr td")
    shot(page, "leases-shared")
    return {"rows": page.evaluate("() => [...document.querySelectorAll('#shared-table tr')].map((r) => r.innerText)")}


def loans_list(page):
    """What the hosts page shows an admin of the capacity lent."""
    login(page, ARGS["login"], "hosts")
    page.wait_for_selector("#loan-table tr td")
    shot(page, "hosts-loans")
    return {"rows": page.evaluate("() => [...document.querySelectorAll('#loan-table tr')].map((r) => r.innerText)")}


def main():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        # A scenario may run in a fixed time zone (the browser's own zone).
        zone = {"timezone_id": ARGS["timezone"]} if ARGS.get("timezone") else {}
        page = browser.new_page(viewport={"width": 1280, "height": 800}, **zone)
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        # A refusal the page shows (403 to a member, 404 for a missing
        # route) is logged by Chromium as a failed load: not a script error.
        page.on("console", lambda m: errors.append(m.text)
                if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
        try:
            result = {"calendar": calendar, "pages": pages, "live": live, "manager": manager,
                      "password_login": password_login, "lease_flow": lease_flow,
                      "admin_controls": admin_controls, "navigate": navigate, "select": select,
                      "host_admin": host_admin, "offer_flow": offer_flow, "zone_flow": zone_flow,
                      "share_flow": share_flow, "shared_list": shared_list,
                      "loans_list": loans_list}[SCENARIO](page)
        except Exception:
            shot(page, f"failed-{SCENARIO}")
            raise
        finally:
            browser.close()
        say({"result": result, "errors": errors})


main()
