#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The fleet status page's DOM (as Chromium dumped it, on stdin) as lines a shell test reads:

  machines N            the page's count of the view's machines (#machines)
  rows N                machine rows (tr.machine), over every fleet and region
  fleet NAME KEY=N ...  a fleet section's data-* counts (machines, slots, allocated, ...)
  faulty ID FAULT|...   a machine of the faults section, its faults' text
  rate N                allocations in the last minute
  ready yes|no          the fleet view's readiness
  made TIME             the page's time (RFC 3339)
  strip N               slot cells of the strips
  external URL          any src/href/url() naming another host

With --netlog FILE, instead: each request Chromium's net log (--log-net-log) shows started,
as "INITIATOR URL" ("not an origin" for the browser's own, e.g. its update checks; a
request the page made names the page's origin).
"""
import json
import re
import sys
from html.parser import HTMLParser


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.out = []
        self.rows = 0
        self.cells = 0
        self.capture = None  # id of the element whose text is wanted
        self.text = {}
        self.faulty = None
        self.faults = []
        self.in_fault = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        for k, v in attrs:
            if k in ("src", "href", "action", "poster") or (v and "url(" in v):
                self.out.append("external %s=%s" % (k, v))
        if tag == "tr" and "machine" in cls:
            self.rows += 1
        if tag == "span" and "s" in cls:
            self.cells += 1
        if tag == "section" and "fleet" in cls:
            counts = " ".join("%s=%s" % (k[5:], v) for k, v in attrs
                              if k.startswith("data-") and k != "data-fleet")
            self.out.append("fleet %s %s" % (a.get("data-fleet"), counts))
        if tag == "tr" and "faulty" in cls:
            self.faulty = a.get("data-machine")
            self.faults = []
        if self.faulty and tag == "span" and "fault" in cls:
            self.in_fault = True
            self.faults.append("")
        if a.get("id") in ("machines", "allocations-last-minute", "view-ready", "made"):
            self.capture = a.get("id")
            self.text[self.capture] = ""

    def handle_endtag(self, tag):
        if tag == "span":
            self.in_fault = False
        if tag == "tr" and self.faulty:
            self.out.append("faulty %s %s" % (self.faulty, "|".join(self.faults)))
            self.faulty = None
        if tag in ("td", "time"):
            self.capture = None

    def handle_data(self, data):
        if self.capture:
            self.text[self.capture] += data
        if self.in_fault:
            self.faults[-1] += data


def netlog(path):
    with open(path) as f:
        log = json.load(f)
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    for e in log["events"]:
        p = e.get("params") or {}
        if names.get(e["type"]) == "URL_REQUEST_START_JOB" and "url" in p:
            print("%s %s" % (p.get("initiator", "none").replace(" ", "_"), p["url"]))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--netlog":
        netlog(sys.argv[2])
        return
    html = sys.stdin.read()
    p = Page()
    p.feed(html)
    p.close()
    for style in re.findall(r"<style>(.*?)</style>", html, re.S):
        for u in re.findall(r"url\(([^)]*)\)|@import", style):
            p.out.append("external css %s" % u)
    print("machines %s" % p.text.get("machines", "").strip())
    print("rows %d" % p.rows)
    print("strip %d" % p.cells)
    print("rate %s" % p.text.get("allocations-last-minute", "").strip())
    print("ready %s" % p.text.get("view-ready", "").strip())
    print("made %s" % p.text.get("made", "").strip())
    for line in p.out:
        print(line)


if __name__ == "__main__":
    main()
