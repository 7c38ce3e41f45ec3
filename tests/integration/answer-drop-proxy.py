#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A TCP relay in front of one etcd member that can lose etcd's answer to one write.

    answer-drop-proxy.py --listen PORT --upstream PORT --arm FILE --log FILE

Every connection is relayed byte for byte to 127.0.0.1:UPSTREAM, unchanged. While FILE
exists and holds "MARKER [COUNT]" (the marker bytes that only the requests to lose hold, for
example a key's "/claims/"; COUNT 1 if not given), the next COUNT requests that hold MARKER go
through to etcd, which applies them; etcd's answer to each is then withheld, and the client's
connection is reset (as when a member dies after it took a request), the upstream connection
closed, COUNT lowered (FILE removed at 0), and one line written to the log file:

    dropped MARKER after N bytes of etcd's answer

With a third word, "MARKER COUNT close", the relay also stops listening when it loses that
answer, before it resets the client's connection: the member is gone for good, and the
client's next connection to it is refused (ECONNREFUSED: a request sent again then sends
nothing). It writes "closed" to the log.

Two kinds of connection: the gRPC calls' HTTP/2 (it starts with HTTP/2's preface): the frames
are read (a 9-byte header each: length, type, flags, stream), the request is the stream whose
DATA frame holds MARKER, and its answer is that stream's first HEADERS frame from etcd, while
other frames and streams go through; the gateway's HTTP/1.1 (one request at a time on a
connection): the request is what the client sent since etcd last answered, and its answer
etcd's next bytes.

That is the case a client of etcd cannot tell apart from a write never made: its outcome
is in doubt (SPEC §13, guarantees). Ends on SIGTERM.
"""
import argparse
import asyncio
import os
import signal
import socket
import struct

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_DATA, H2_HEADERS = 0, 1


class H2Frames:
    """HTTP/2 frames out of a byte stream: feed() returns the complete ones, as (type,
    stream, payload); the connection preface, when skip_preface, is passed over."""

    def __init__(self, skip_preface):
        self.buf = bytearray()
        self.preface = skip_preface

    def feed(self, data):
        self.buf.extend(data)
        if self.preface:
            if len(self.buf) < len(H2_PREFACE):
                return []
            del self.buf[:len(H2_PREFACE)]
            self.preface = False
        frames = []
        while len(self.buf) >= 9:
            length = int.from_bytes(self.buf[0:3], "big")
            if len(self.buf) < 9 + length:
                break
            ftype = self.buf[3]
            stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
            frames.append((ftype, stream, bytes(self.buf[9:9 + length])))
            del self.buf[:9 + length]
        return frames


class Relay:
    def __init__(self, args):
        self.args = args
        self.close_after = False
        self.server = None

    def armed(self):
        try:
            with open(self.args.arm, "rb") as f:
                words = f.read().split()
        except FileNotFoundError:
            return b"", 0
        if not words:
            return b"", 0
        self.close_after = len(words) > 2 and words[2] == b"close"
        return words[0], int(words[1]) if len(words) > 1 else 1

    def disarm_one(self, marker, count):
        if count > 1:
            with open(self.args.arm + ".new", "wb") as f:
                f.write(b"%s %d%s\n" % (marker, count - 1, b" close" if self.close_after else b""))
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
        close = [False]  # the relay stops listening once this answer is lost
        seen = bytearray()  # HTTP/1.1: what the client sent since etcd last answered
        h2 = {"up": None, "down": None, "stream": None}  # HTTP/2: the frames, the doomed stream

        def mark(m, count, stream=None):
            close[0] = self.close_after and count == 1
            self.disarm_one(m, count)
            marker[0] = m
            h2["stream"] = stream
            doomed.set()

        def look_up(data):
            if h2["up"] is None and len(seen) + len(data) >= len(H2_PREFACE) and \
                    not h2.get("decided"):
                h2["decided"] = True
                if (bytes(seen) + data).startswith(H2_PREFACE):
                    h2["up"], h2["down"] = H2Frames(True), H2Frames(False)
                    h2["up"].feed(bytes(seen))
            if h2["up"] is None:
                seen.extend(data)
                m, count = self.armed()
                if m and not doomed.is_set() and m in seen:
                    mark(m, count)
                return
            for ftype, stream, payload in h2["up"].feed(data):
                m, count = self.armed()
                if ftype == H2_DATA and m and not doomed.is_set() and m in payload:
                    mark(m, count, stream)

        def answered(data):
            """Whether data from etcd holds the doomed request's answer."""
            if h2["down"] is None:
                return True
            return any(ftype == H2_HEADERS and stream == h2["stream"]
                       for ftype, stream, _ in h2["down"].feed(data))

        async def up():
            try:
                while True:
                    data = await creader.read(65536)
                    if not data:
                        break
                    look_up(data)
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
                    if h2["down"] is not None and not doomed.is_set():
                        h2["down"].feed(data)
                    if doomed.is_set() and answered(data):
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
                if doomed.is_set() and close[0]:
                    self.server.close()  # no longer listening: connections are refused
                    self.note("closed")
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
    relay.server = server
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    relay.note("listening on %d" % args.listen)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
