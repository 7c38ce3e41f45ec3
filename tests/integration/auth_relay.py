#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A relay on 127.0.0.1 that passes each GET to UPSTREAM with "Authorization: Bearer TOKEN"
added (a browser cannot be told to send a header): how an operator's authenticating proxy
would serve the allocator's status page. Usage: auth_relay.py PORT UPSTREAM TOKEN_FILE.
Prints "ready" once listening."""
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

PORT, UPSTREAM, TOKEN_FILE = int(sys.argv[1]), sys.argv[2], sys.argv[3]
TOKEN = open(TOKEN_FILE).read().strip()


class Relay(BaseHTTPRequestHandler):
    def do_GET(self):
        req = urllib.request.Request(UPSTREAM + self.path,
                                     headers={"Authorization": "Bearer " + TOKEN})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status, ctype, body = r.status, r.headers.get("Content-Type"), r.read()
        except urllib.error.HTTPError as e:
            status, ctype, body = e.code, e.headers.get("Content-Type"), e.read()
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        sys.stderr.write("relay: " + (fmt % args) + "\n")


server = HTTPServer(("127.0.0.1", PORT), Relay)
print("ready", flush=True)
server.serve_forever()
