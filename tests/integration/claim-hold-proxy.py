#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A TCP relay in front of one etcd member that holds one write a while, as a paused member
holds the proposal it was sent (issue 25 point 3: "a 503 is never an allocation").

    claim-hold-proxy.py --listen PORT --upstream PORT --arm FILE --hold-ms MS --log FILE

Every connection is relayed to 127.0.0.1:UPSTREAM byte for byte and in order. While FILE
exists and holds a MARKER (bytes only the request to hold has, e.g. a claim key's "/claims/"),
the next gRPC call whose first DATA frame holds MARKER is held: its HEADERS frame and every
byte the client sends after it on that connection stay in the relay for MS milliseconds (the
client's request times out meanwhile, and the client goes to its next endpoint, if it has
one), then go to etcd in their order, but for the client's RST_STREAM of the held call, which
is dropped (the member got the request before the client gave up on it: it proposes it when
it wakes). FILE is removed. Nothing is reordered, so HTTP/2's header compression stays in
step. FILE may hold "MARKER MS" (this hold's own time) or "MARKER release" (held until
FILE.release exists, which is then removed). Once a hold is released, FILE armed again holds
the next call it matches, on any connection.

etcd's late answer to the held call goes to the client (which reset the stream and ignores
it, or has closed the connection meanwhile: a paused member answers no PING either, and the
client gives the connection up); the relay reads it and logs whether the transaction's
compares held:

    held MARKER (stream N)
    released stream N after MS ms
    answered stream N: succeeded=true|false      (the claim's transaction; trailers: no message)

Cleartext HTTP/2 only for the held call (the JSON gateway's HTTP/1.1 goes through untouched).
Prints "listening" to the log once it listens. Ends on SIGTERM."""
import argparse
import asyncio
import os
import signal

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM = 0, 1, 3
END_STREAM = 0x1


def varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def fields(msg):
    """A protobuf message's top-level fields, as (number, value): ints and bytes."""
    i, out = 0, []
    while i < len(msg):
        tag, i = varint(msg, i)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            v, i = varint(msg, i)
        elif wire == 2:
            n, i = varint(msg, i)
            v, i = msg[i:i + n], i + n
        elif wire == 1:
            v, i = msg[i:i + 8], i + 8
        elif wire == 5:
            v, i = msg[i:i + 4], i + 4
        else:
            break
        out.append((field, v))
    return out


def txn_succeeded(msg):
    """TxnResponse's succeeded (field 2, proto3: absent when false); for a group commit's
    request (etcd.h: its transactions nested, each a ResponseOp's response_txn, field 4, in
    responses, field 3), the nested ones', comma-separated."""
    top = fields(msg)
    nested = []
    for f, v in top:
        if f == 3 and isinstance(v, bytes):
            nested += [txn_succeeded_one(w) for g, w in fields(v) if g == 4]
    if nested:
        return ",".join(nested)
    return txn_succeeded_one(msg)


def txn_succeeded_one(msg):
    return "true" if any(f == 2 and v for f, v in fields(msg)) else "false"


class Frames:
    """Whole HTTP/2 frames out of a byte stream, each as (type, flags, stream, payload, raw)."""

    def __init__(self):
        self.buf = bytearray()

    def feed(self, data):
        self.buf.extend(data)
        out = []
        while len(self.buf) >= 9:
            length = int.from_bytes(self.buf[0:3], "big")
            if len(self.buf) < 9 + length:
                break
            raw = bytes(self.buf[:9 + length])
            del self.buf[:9 + length]
            stream = int.from_bytes(raw[5:9], "big") & 0x7FFFFFFF
            out.append((raw[3], raw[4], stream, raw[9:], raw))
        return out


class Relay:
    def __init__(self, args):
        self.args = args

    def note(self, line):
        with open(self.args.log, "a") as f:
            f.write(line + "\n")

    def marker(self):
        """The armed marker and how long to hold (b"" and None when not armed)."""
        try:
            with open(self.args.arm, "rb") as f:
                words = f.read().split()
        except FileNotFoundError:
            return b"", None
        if not words:
            return b"", None
        return words[0], (words[1].decode() if len(words) > 1 else None)

    async def client(self, creader, cwriter):
        try:
            ureader, uwriter = await asyncio.open_connection("127.0.0.1", self.args.upstream)
        except OSError:
            cwriter.close()
            return
        st = {"held": None, "streams": set()}

        async def release(stream, how):
            loop = asyncio.get_running_loop()
            start = loop.time()
            if how == "release":
                gate = self.args.arm + ".release"
                while not os.path.exists(gate):
                    await asyncio.sleep(0.02)
                os.unlink(gate)
            else:
                await asyncio.sleep((int(how) if how else self.args.hold_ms) / 1000)
            held, st["held"] = st["held"], None
            uwriter.write(b"".join(r for t, _, s, _, r in held if not (t == RST_STREAM and s == stream)))
            self.note("released stream %d after %d ms" % (stream, (loop.time() - start) * 1000))
            await uwriter.drain()

        async def up():
            try:
                await relay_up()
            except (ConnectionError, OSError, asyncio.IncompleteReadError):
                pass  # the client is gone: what is held still goes (release), and down() logs

        async def relay_up():
            first = await creader.readexactly(len(PREFACE))
            uwriter.write(first)
            if first != PREFACE:  # HTTP/1.1: as it comes
                while True:
                    data = await creader.read(65536)
                    if not data:
                        return
                    uwriter.write(data)
                    await uwriter.drain()
            frames, pending = Frames(), []  # a call's HEADERS until its first DATA
            opening = None
            while True:
                data = await creader.read(65536)
                if not data:
                    return
                for ftype, flags, stream, payload, raw in frames.feed(data):
                    if st["held"] is not None:
                        st["held"].append((ftype, flags, stream, payload, raw))
                        continue
                    m, how = self.marker()
                    if m and opening is None and ftype == HEADERS and not flags & END_STREAM:
                        opening = stream
                    if opening is None:
                        uwriter.write(raw)
                        continue
                    pending.append((ftype, flags, stream, payload, raw))
                    if ftype == DATA and stream == opening:
                        if m and m in payload:
                            os.unlink(self.args.arm)
                            st["held"] = pending
                            st["streams"].add(stream)
                            self.note("held %s (stream %d)" % (m.decode(), stream))
                            asyncio.ensure_future(release(stream, how))
                        else:
                            uwriter.write(b"".join(p[4] for p in pending))
                        pending, opening = [], None
                await uwriter.drain()

        async def down():
            frames, client_gone = Frames(), False
            while True:
                data = await ureader.read(65536)
                if not data:
                    return
                if st["streams"]:
                    for ftype, flags, stream, payload, _ in frames.feed(data):
                        if stream not in st["streams"]:
                            continue
                        if ftype == DATA and len(payload) > 5:
                            self.note("answered stream %d: succeeded=%s" % (
                                stream, txn_succeeded(payload[5:])))
                        elif ftype == HEADERS and b"grpc-status" in payload:
                            self.note("answered stream %d: trailers" % stream)
                else:
                    frames.feed(data)
                if client_gone:
                    continue
                try:
                    cwriter.write(data)
                    await cwriter.drain()
                except (ConnectionError, OSError):
                    client_gone = True

        try:
            await asyncio.gather(up(), down())
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            cwriter.close()
            uwriter.close()


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", type=int, required=True)
    p.add_argument("--upstream", type=int, required=True)
    p.add_argument("--arm", required=True)
    p.add_argument("--hold-ms", type=int, required=True)
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
