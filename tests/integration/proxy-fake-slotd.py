#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Plays slotd's side of localproxy/ipc.h for test-proxy-alone.sh.

Binds 127.0.0.1:PORT (a free port) and [::1]:PORT, starts slotd-proxy with them and one end of
a SOCK_SEQPACKET socketpair, and answers the proxy as slotd would, by simple rules:

  - a connection to 127.0.0.1 is slot 1's server, one to [::1] is outside any slot;
  - a request about another server than the caller's slot: access-denied (403);
  - server 98: never answered (the proxy's 5 s deadline); server 99: "unavailable";
  - payload of allocation "alloc-1": a JSON document; of anything else: no-such-allocation.

Every message received goes to DIR/ipc.log (one JSON object a line). A message out of order
(a request or close of a connection never announced, a connection announced twice) goes to
DIR/violations. Commands, one a line, come through the FIFO DIR/ctl:

  event SERVER TYPE ALLOC     an allocation event (offset + 1) to the proxy
  burst SERVER N              N events at once (backpressure)
  hold-subscribes             answer subscribes later, as computed when they came ...
  release-subscribes          ... now
  ignore-conns                leave "conn" messages unanswered
  quit                        close the IPC socket; DIR/proxy.rc gets the proxy's exit code
Each command done but quit is appended to DIR/ctl.done.

DIR/port holds "PORT V6" (V6 1 when [::1] is served) once the proxy runs.
"""
import argparse
import base64
import json
import os
import select
import socket
import subprocess
import sys
import time
import uuid

PAYLOAD = b'{"matchId":"m1","players":["a","b"]}'


class FakeSlotd:
    def __init__(self, sock, directory):
        self.sock = sock
        self.dir = directory
        self.conns = {}           # conn id -> slot (None: outside any slot)
        self.seen = set()
        self.offsets = {}         # server -> offset
        self.last = {}            # server -> last event (without "type")
        self.holds = {}           # server -> expires_at
        self.holding = False
        self.held_replies = []
        self.ignore_conns = False
        self.log = open(os.path.join(directory, 'ipc.log'), 'a', buffering=1)
        self.violations = open(os.path.join(directory, 'violations'), 'a', buffering=1)

    def send(self, obj):
        self.sock.send(json.dumps(obj, separators=(',', ':')).encode())

    def violation(self, text):
        self.violations.write(text + '\n')

    def reply(self, m, result=None, code=None, message=None):
        if code:
            self.send({'type': 'reply', 'id': m['id'],
                       'error': {'code': code, 'message': message}})
        else:
            self.send({'type': 'reply', 'id': m['id'], 'result': result})

    def handle(self, m):
        self.log.write(json.dumps(m) + '\n')
        t = m.get('type')
        if t == 'conn':
            if m['conn'] in self.seen:
                self.violation('conn %d announced twice' % m['conn'])
            self.seen.add(m['conn'])
            slot = 1 if m['local'] == '127.0.0.1' else None
            self.conns[m['conn']] = slot
            if self.ignore_conns:
                return
            self.send({'type': 'conn', 'conn': m['conn'], 'slot': slot, 'admin': False})
        elif t == 'close':
            if m['conn'] not in self.conns:
                self.violation('close of unknown conn %d' % m['conn'])
            self.conns.pop(m['conn'], None)
        elif t == 'request':
            if m['conn'] not in self.conns:
                self.violation('request %d of unknown conn %d' % (m['id'], m['conn']))
                self.reply(m, code='failed', message='unknown connection')
                return
            self.answer(m)
        else:
            self.violation('unknown message type %r' % t)

    def answer(self, m):
        op, server = m['op'], m.get('server')
        slot = self.conns[m['conn']]
        if server == 98:
            return
        if server == 99:
            return self.reply(m, code='unavailable', message='unavailable: slotd is draining')
        if server is not None and server != slot:
            return self.reply(m, code='access-denied',
                              message='access-denied: the caller is not the server of slot %d'
                              % server)
        handler = getattr(self, 'op_' + op, None)
        if not handler:
            return self.reply(m, code='invalid-argument', message='unknown op ' + op)
        handler(m, server)

    def op_ready(self, m, server):
        if not isinstance(m.get('ready'), bool) or not m.get('allocation'):
            return self.reply(m, code='invalid-argument', message='bad ready request')
        self.reply(m, {})

    def op_hold(self, m, server):
        self.holds[server] = int(time.time() + m['timeout_usec'] / 1e6)
        self.reply(m, {'held': True, 'expires_at': self.holds[server]})

    def op_hold_status(self, m, server):
        self.reply(m, {'held': server in self.holds, 'expires_at': self.holds.get(server, 0)})

    def op_release_hold(self, m, server):
        if server not in self.holds:
            return self.reply(m, code='invalid-state', message='invalid-state: no hold')
        del self.holds[server]
        self.reply(m, {})

    def op_reserve(self, m, server):
        self.reply(m, {'reservation_id': str(uuid.uuid4()), 'build_configuration_id': '1234',
                       'game_port': 9000 + server, 'ipv4': '127.0.0.1', 'ipv6': '::1',
                       'requested': '2024-01-01T00:00:00Z', 'created': '2024-01-01T00:00:01Z',
                       'fulfilled': '2024-01-01T00:00:02Z'})

    def op_unreserve(self, m, server):
        self.reply(m, {})

    def op_payload(self, m, server):
        if m.get('allocation') != 'alloc-1':
            return self.reply(m, code='no-such-allocation',
                              message='no-such-allocation: %s' % m.get('allocation'))
        self.reply(m, {'payload': base64.b64encode(PAYLOAD).decode()})

    def op_token(self, m, server):
        self.reply(m, {'token': 'aaa.bbb.ccc'})

    def op_subscribe(self, m, server):
        result = {'epoch': 'e1', 'offset': self.offsets.get(server, 0),
                  'last': self.last.get(server)}
        if self.holding:
            self.held_replies.append((m, result))
        else:
            self.reply(m, result)

    def event(self, server, etype, alloc):
        self.offsets[server] = self.offsets.get(server, 0) + 1
        ev = {'server': server, 'epoch': 'e1', 'offset': self.offsets[server],
              'event_type': etype, 'event_id': str(uuid.uuid4()), 'allocation': alloc}
        self.last[server] = ev
        self.send(dict(ev, type='event'))

    def command(self, line):
        words = line.split()
        if not words:
            return
        if words[0] == 'event':
            self.event(int(words[1]), words[2], words[3])
        elif words[0] == 'burst':
            for i in range(int(words[2])):
                while True:
                    try:
                        self.event(int(words[1]), 'AllocateEventType', 'burst-%d' % i)
                        break
                    except BlockingIOError:
                        self.pump(0.01)
        elif words[0] == 'ignore-conns':
            self.ignore_conns = True
        elif words[0] == 'hold-subscribes':
            self.holding = True
        elif words[0] == 'release-subscribes':
            self.holding = False
            for m, result in self.held_replies:
                self.reply(m, result)
            self.held_replies = []

    def pump(self, timeout):
        r, _, _ = select.select([self.sock], [], [], timeout)
        while r:
            try:
                data = self.sock.recv(256 * 1024)
            except BlockingIOError:
                return True
            if not data:
                return False
            self.handle(json.loads(data))
        return True


def listeners():
    l4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    l4.bind(('127.0.0.1', 0))
    l4.listen(128)
    port = l4.getsockname()[1]
    try:
        l6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        l6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        l6.bind(('::1', port))
        l6.listen(128)
        return port, [l4, l6]
    except OSError:
        return port, [l4]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--proxy', required=True)
    ap.add_argument('--dir', required=True)
    a = ap.parse_args()

    ctl_path = os.path.join(a.dir, 'ctl')
    os.mkfifo(ctl_path)
    ctl = os.open(ctl_path, os.O_RDWR | os.O_NONBLOCK)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    port, ls = listeners()
    fds = [theirs.fileno()] + [s.fileno() for s in ls]
    args = [a.proxy, '--ipc-fd', str(theirs.fileno())]
    for s in ls:
        args += ['--listen-fd', str(s.fileno())]
    with open(os.path.join(a.dir, 'proxy.log'), 'ab') as err:
        proc = subprocess.Popen(args, pass_fds=fds, stderr=err)
    # The proxy holds them now; nobody here accepts.
    theirs.close()
    for s in ls:
        s.close()
    ours.setblocking(False)
    with open(os.path.join(a.dir, 'proxy.pid'), 'w') as f:
        f.write('%d\n' % proc.pid)
    with open(os.path.join(a.dir, 'port.tmp'), 'w') as f:
        f.write('%d %d\n' % (port, 1 if len(ls) == 2 else 0))
    os.rename(os.path.join(a.dir, 'port.tmp'), os.path.join(a.dir, 'port'))

    slotd = FakeSlotd(ours, a.dir)
    pending = b''
    while proc.poll() is None:
        r, _, _ = select.select([ours, ctl], [], [], 0.2)
        if ours in r and not slotd.pump(0):
            break
        if ctl in r:
            pending += os.read(ctl, 65536)
            *lines, pending = pending.split(b'\n')
            for line in lines:
                if line.strip() == b'quit':
                    ours.close()
                    try:
                        rc = proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        rc = 'timeout'
                    with open(os.path.join(a.dir, 'proxy.rc'), 'w') as f:
                        f.write('%s\n' % rc)
                    return 0
                slotd.command(line.decode())
                with open(os.path.join(a.dir, 'ctl.done'), 'a') as f:
                    f.write(line.decode() + '\n')
    with open(os.path.join(a.dir, 'proxy.rc'), 'w') as f:
        f.write('died %s\n' % proc.poll())
    return 1


if __name__ == '__main__':
    sys.exit(main())
