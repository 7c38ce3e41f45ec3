#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A TCP relay in front of one etcd member that can lose etcd's answer to one write.

    answer-drop-proxy.py --listen PORT --upstream PORT --arm FILE --log FILE

Every connection is relayed byte for byte to 127.0.0.1:UPSTREAM (no HTTP is parsed: the
streams of a watch go through as they are). While FILE exists and holds "MARKER [COUNT]"
(the marker for example "request_put" or "request_delete_range", COUNT 1 if not given), the
next COUNT requests that hold MARKER go through to etcd, which applies them; etcd's answer
to each is then withheld, and the client's connection is reset (as when a member dies after
it took a request), the upstream connection closed, COUNT lowered (FILE removed at 0), and
one line written to the log file:

    dropped MARKER after N bytes of etcd's answer

That is the case a client of etcd cannot tell apart from a write never made: its outcome
is in doubt (SPEC §13, guarantees). Ends on SIGTERM.
"""
import argparse
import asyncio
import os
import signal
import socket
import struct


class Relay:
    def __init__(self, args):
        self.args = args

    def armed(self):
        try:
            with open(self.args.arm, "rb") as f:
                words = f.read().split()
        except FileNotFoundError:
            return b"", 0
        if not words:
            return b"", 0
        return words[0], int(words[1]) if len(words) > 1 else 1

    def disarm_one(self, marker, count):
        if count > 1:
            with open(self.args.arm + ".new", "wb") as f:
                f.write(b"%s %d\n" % (marker, count - 1))
            os.rename(self.args.arm + ".new", self.args.arm)
        else:
            try:
                os.unlink(self.args.arm)
            except FileNotFoundError:
                pass

    def note(self, line):
        with open(self.args.log, "a") as f:
            f.write(line + "\n")

    async def client(self, creader, cwriter):
        try:
            ureader, uwriter = await asyncio.open_connection("127.0.0.1", self.args.upstream)
        except OSError:
            cwriter.close()
            return
        doomed = asyncio.Event()
        marker = [b""]
        seen = bytearray()  # what the client sent since etcd last answered on this link

        async def up():
            try:
                while True:
                    data = await creader.read(65536)
                    if not data:
                        break
                    seen.extend(data)
                    m, count = self.armed()
                    if m and not doomed.is_set() and m in seen:
                        self.disarm_one(m, count)
                        marker[0] = m
                        doomed.set()
                    uwriter.write(data)
                    await uwriter.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                if not doomed.is_set():
                    uwriter.close()

        async def down():
            try:
                while True:
                    data = await ureader.read(65536)
                    if not data:
                        break
                    if doomed.is_set():
                        # etcd answered the marked request: it was applied. Lose the answer.
                        self.note("dropped %s after %d bytes of etcd's answer"
                                  % (marker[0].decode(), len(data)))
                        break
                    seen.clear()
                    cwriter.write(data)
                    await cwriter.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sock = cwriter.get_extra_info("socket")
                if doomed.is_set() and sock is not None:
                    # a reset, not an orderly close: the member is gone
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
                cwriter.close()
                uwriter.close()

        await asyncio.gather(up(), down())


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", type=int, required=True)
    p.add_argument("--upstream", type=int, required=True)
    p.add_argument("--arm", required=True)
    p.add_argument("--log", required=True)
    args = p.parse_args()
    relay = Relay(args)
    server = await asyncio.start_server(relay.client, "127.0.0.1", args.listen)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    relay.note("listening on %d" % args.listen)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
