#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The query exchanges that tell Unity's Go SDK v0.5.4 responders apart from lenient ones:
# test-double-query.py sqp|a2s PORT sends them to 127.0.0.1:PORT and prints one line per
# datagram sent, "<step>: <what came back>", what came back being "nothing" or the kind of
# answer (never its bytes: challenges are random, and the double's server info is its own).
# test-double.sh runs it against the double and, where it is there, the SDK's own responder.
import socket
import struct
import sys

TIMEOUT = 0.3


class Client:
    def __init__(self, port):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.s.settimeout(TIMEOUT)
        self.s.connect(("127.0.0.1", port))

    def ask(self, data):
        self.s.send(data)
        try:
            return self.s.recv(2048)
        except socket.timeout:
            return None


def sqp_kind(r):
    if r is None:
        return "nothing"
    if len(r) == 5 and r[0] == 0:
        return "challenge"
    if len(r) >= 11 and r[0] == 1:
        payload = struct.unpack(">H", r[9:11])[0]
        return "server info" if payload > 0 else "header only"
    return "garbled " + r.hex()


def a2s_kind(r):
    if r is None:
        return "nothing"
    if len(r) == 9 and r[:5] == b"\xff\xff\xff\xff\x41":
        return "challenge"
    if r[:5] == b"\xff\xff\xff\xff\x49":
        return "info"
    return "garbled " + r.hex()


def sqp_query(challenge, version=1, chunks=1):
    return b"\x01" + struct.pack(">IHB", challenge, version, chunks)


def sqp(port):
    a, b = Client(port), Client(port)
    steps = []

    def step(name, client, data):
        r = client.ask(data)
        steps.append(f"{name}: {sqp_kind(r)}")
        return struct.unpack(">I", r[1:5])[0] if r and len(r) == 5 else 0

    c = step("challenge", a, b"\0" * 5)
    step("query", a, sqp_query(c))
    step("the same query again", a, sqp_query(c))
    c = step("a lone 00", a, b"\0")
    step("a wrong challenge", a, sqp_query(c ^ 1))
    step("the right one after it", a, sqp_query(c))
    for version in (0, 2, 3, 0x100):
        c = step("challenge", a, b"\0" * 5)
        step(f"version {version}", a, sqp_query(c, version))
    step("version 1 after a refused version", a, sqp_query(c))
    c = step("challenge", a, b"\0" * 5)
    step("no chunk asked for", a, sqp_query(c, chunks=0))
    c = step("challenge", a, b"\0" * 5)
    step("another port's query", b, sqp_query(c))
    step("the challenger's own", a, sqp_query(c))
    c = step("challenge", a, b"\0" * 5)
    step("01 and the challenge, nothing more", a, b"\x01" + struct.pack(">I", c))
    c1 = step("challenge", a, b"\0" * 5)
    step("another challenge", a, b"\0" * 5)
    step("the first of the two", a, sqp_query(c1))
    step("an empty datagram", a, b"")
    step("00000000 01", a, b"\0\0\0\0\x01")
    step("junk", a, b"\x05abc")
    return steps


def a2s(port):
    a = Client(port)
    request = b"\xff\xff\xff\xffTSource Engine Query\0"
    steps = []

    def step(name, data):
        r = a.ask(data)
        steps.append(f"{name}: {a2s_kind(r)}")
        return r[5:9] if r and len(r) == 9 else b"\0\0\0\0"

    c = step("request", request)
    step("with the challenge", request + c)
    step("with it again", request + c)
    step("with ffffffff", request + b"\xff\xff\xff\xff")
    c = step("request", request)
    step("a wrong challenge", request + bytes([c[0] ^ 1]) + c[1:])
    c = step("an empty payload", b"\xff\xff\xff\xffT\0")
    step("another payload, the challenge", b"\xff\xff\xff\xffTfoo\0" + c)
    c = step("a zero challenge", request + b"\0\0\0\0")
    step("two bytes of challenge", request + b"\x01\x02")
    step("A2S_PLAYER", b"\xff\xff\xff\xffV\0\0\0\0")
    step("an SQP challenge request", b"\0" * 5)
    return steps


def main():
    what, port = sys.argv[1], int(sys.argv[2])
    for line in (sqp if what == "sqp" else a2s)(port):
        print(line)


main()
