#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A TCP relay in front of one etcd member that delays what etcd's watches tell one client.

    watch-delay-proxy.py --listen PORT --upstream PORT --arm FILE

Every connection is relayed to 127.0.0.1:UPSTREAM unchanged, byte for byte, but for the order
of etcd's frames: while FILE exists and holds a number of milliseconds D, each frame etcd sends
on a watch's stream (HTTP/2 DATA, HEADERS, CONTINUATION) is held D ms before it goes on, while
the answers to every other call (ranges, transactions, leases) go through at once. The client's
view, kept by its watches, then lags etcd by D: what a test needs to make "a replica whose watch
is behind" at will (test-allocator-delete.sh). Frames held keep their order; once FILE is gone,
the held ones still go first. Prints "listening" once it listens.

Cleartext HTTP/2 (no TLS) only: the client's frames are read (a 9-byte header each: length,
type, flags, stream) after the 24-byte preface, and a stream is a watch's when its first gRPC
message is a WatchRequest with a create_request: field 1 holding a message whose own first
field is 1 (the key), where a RangeRequest's field 1 is the key itself (bytes starting "/") and
the other calls start with other fields. Ends on SIGTERM."""
import argparse
import asyncio
import signal
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, CONTINUATION = 0, 1, 9
PADDED = 0x8


def delay_ms(arm):
    try:
        with open(arm) as f:
            return int(f.read().strip() or "0")
    except (OSError, ValueError):
        return 0


async def read_frame(reader):
    head = await reader.readexactly(9)
    length = int.from_bytes(head[:3], "big")
    payload = await reader.readexactly(length)
    return head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF, head + payload


def is_watch_create(flags, frame):
    p = frame[9:]
    if flags & PADDED:
        p = p[1:]
    msg = p[5:]
    return len(msg) >= 3 and msg[0] == 0x0A and msg[1] < 0x80 and msg[2] == 0x0A


async def client_to_etcd(reader, writer, watches, seen):
    writer.write(await reader.readexactly(len(PREFACE)))
    while True:
        ftype, flags, stream, frame = await read_frame(reader)
        if ftype == DATA and stream not in seen:
            seen.add(stream)
            if is_watch_create(flags, frame):
                watches.add(stream)
        writer.write(frame)
        await writer.drain()


async def etcd_to_client(reader, writer, watches, arm):
    held = asyncio.Queue()

    async def release():
        while True:
            due, frame = await held.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(frame)
            await writer.drain()

    task = asyncio.ensure_future(release())
    try:
        while True:
            ftype, flags, stream, frame = await read_frame(reader)
            d = delay_ms(arm) if stream in watches and ftype in (DATA, HEADERS, CONTINUATION) else 0
            if d > 0 or (stream in watches and not held.empty()):
                held.put_nowait((time.monotonic() + d / 1000.0, frame))
            else:
                writer.write(frame)
                await writer.drain()
    finally:
        task.cancel()


async def relay(client_r, client_w, upstream, arm):
    try:
        etcd_r, etcd_w = await asyncio.open_connection("127.0.0.1", upstream)
    except OSError:
        client_w.close()
        return
    watches, seen = set(), set()
    tasks = [asyncio.ensure_future(client_to_etcd(client_r, etcd_w, watches, seen)),
             asyncio.ensure_future(etcd_to_client(etcd_r, client_w, watches, arm))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        client_w.close()
        etcd_w.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--upstream", type=int, required=True)
    ap.add_argument("--arm", required=True)
    a = ap.parse_args()
    server = await asyncio.start_server(lambda r, w: relay(r, w, a.upstream, a.arm),
                                        "127.0.0.1", a.listen)
    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
    print("listening", flush=True)
    async with server:
        await stop


if __name__ == "__main__":
    asyncio.run(main())
