#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pyserve.py PORTFILE: runs `python3 -c CODE ARGS...` for the test harness without starting
a python each time (lib.sh's `py` and `py_in`).

In the TCG VM of tests/vm a python3 start costs about half a CPU second, and the harness
starts one to read each JSON answer (ListSlots, server.json, etcd's documents), often in
polls; the guest's CPU is the test run's bottleneck. This server starts once per test, with
the modules those snippets use already imported, and runs each snippet in a process forked
from it: what a snippet does (sys.exit, globals, open files) ends with its process, as with
`python3 -c`.

It listens on 127.0.0.1 (a port the kernel picks, written to PORTFILE when it listens) and
dies with the shell that started it (PR_SET_PDEATHSIG). One request a connection, every
length in bytes:

    request:  "NARGS STDINLEN\\n", then NARGS times "LEN\\n" + the bytes (CODE, then its
              arguments), then STDINLEN bytes of standard input
    answer:   "STATUS OUTLEN ERRLEN\\n", then the snippet's standard output and error
"""
import ctypes
import io
import json  # noqa: F401 (imported once here, for the snippets)
import os
import signal
import socketserver
import sys
import traceback


def read_line(f):
    line = f.readline()
    if not line.endswith(b"\n"):
        raise EOFError("short request")
    return line


def read_exact(f, n):
    data = f.read(n)
    if len(data) != n:
        raise EOFError("short request")
    return data


def run(code, args, stdin):
    out, err = io.StringIO(), io.StringIO()
    sys.argv = ["-c"] + args
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8", errors="surrogateescape")
    sys.stdout, sys.stderr = out, err
    status = 0
    try:
        exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as e:
        if e.code is None:
            status = 0
        elif isinstance(e.code, int):
            status = e.code
        else:
            print(e.code, file=err)
            status = 1
    except BaseException:
        traceback.print_exc(file=err)
        status = 1
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    return status, out.getvalue(), err.getvalue()


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        f = self.rfile
        nargs, inlen = (int(x) for x in read_line(f).split())
        fields = [read_exact(f, int(read_line(f))) for _ in range(nargs)]
        stdin = read_exact(f, inlen)
        fields = [x.decode("utf-8", "surrogateescape") for x in fields]
        status, out, err = run(fields[0], fields[1:], stdin)
        ob = out.encode("utf-8", "surrogateescape")
        eb = err.encode("utf-8", "surrogateescape")
        self.wfile.write(b"%d %d %d\n" % (status & 0xFF, len(ob), len(eb)) + ob + eb)


class Server(socketserver.ForkingMixIn, socketserver.TCPServer):
    allow_reuse_address = True
    request_queue_size = 64
    block_on_close = False


def main():
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:
        return  # the shell that started us is gone already
    with Server(("127.0.0.1", 0), Handler) as server:
        tmp = sys.argv[1] + ".tmp"
        with open(tmp, "w") as p:
            p.write("%d\n" % server.server_address[1])
        os.rename(tmp, sys.argv[1])
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        server.serve_forever()


if __name__ == "__main__":
    main()
