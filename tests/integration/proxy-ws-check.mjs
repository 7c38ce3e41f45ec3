#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// Raw WebSocket checks of slotd-proxy's Centrifuge sessions, for test-proxy-alone.sh, with
// the `ws` package of tests/integration/node/. Protocol v2 frames are written by hand, so
// that what the proxy sends can be checked to the field.
//
//   node proxy-ws-check.mjs MODE PORT [ARG]
//
//   bad                hostile frames end the session with the right close code
//   recover OFFSET     recovery and subscribe errors; OFFSET: server 1's current offset,
//                      whose event is an AllocateEventType
//   held OFFSET        a fresh subscribe whose answer slotd holds back while an event at
//                      OFFSET + 1 comes: the reply, then exactly that event
//   ping               a v2 client that never answers pings: pinged, then closed
//   stall              subscribes, prints {"port":LOCAL_PORT}, then reads nothing
// Exits 0 when every check holds, 1 (with the reason on stderr) otherwise.
import { createRequire } from 'node:module';

const require = createRequire(new URL('./node/package.json', import.meta.url));
const WebSocket = require('ws');

const [mode, port, arg] = process.argv.slice(2);
const url = `ws://127.0.0.1:${port}/v1/connection/websocket`;

function fail(message) {
  process.stderr.write(`proxy-ws-check ${mode}: ${message}\n`);
  process.exit(1);
}

function deadline(ms, what) {
  return setTimeout(() => fail(`timed out: ${what}`), ms);
}

// A connection with a queue of the frames (or the close) it got, read in order.
function open() {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const queue = [];
    const waiters = [];
    const push = (item) => (waiters.length ? waiters.shift()(item) : queue.push(item));
    ws.on('message', (data) => {
      for (const line of data.toString().split('\n')) push({ msg: JSON.parse(line) });
    });
    ws.on('close', (code) => push({ close: code }));
    ws.on('error', reject);
    ws.on('open', () => resolve({
      ws,
      send: (obj) => ws.send(typeof obj === 'string' ? obj : JSON.stringify(obj)),
      next: (what, ms = 5000) => new Promise((res) => {
        const t = deadline(ms, what);
        const done = (item) => { clearTimeout(t); res(item); };
        if (queue.length) done(queue.shift()); else waiters.push(done);
      }),
    }));
  });
}

async function expectMsg(c, what, ms) {
  const item = await c.next(what, ms);
  if (!item.msg) fail(`${what}: closed (${item.close}) instead`);
  return item.msg;
}

async function expectClose(c, code, what, ms = 5000) {
  for (;;) {
    const item = await c.next(what, ms);
    if (item.close !== undefined) {
      if (item.close !== code) fail(`${what}: close code ${item.close}, expected ${code}`);
      return;
    }
  }
}

async function connect(c, id = 1) {
  c.send({ id, connect: {} });
  const m = await expectMsg(c, 'connect reply');
  if (!m.connect || !m.connect.client || m.connect.ping !== 25 || m.connect.pong !== true)
    fail(`bad connect reply ${JSON.stringify(m)}`);
}

async function bad() {
  let c = await open();
  c.send('this is not json');
  await expectClose(c, 3501, 'junk text');
  c = await open();
  c.ws.send(Buffer.from([1, 2, 3]), { binary: true });
  await expectClose(c, 1003, 'binary frame');
  c = await open();
  c.send('x'.repeat(70 * 1024));
  await expectClose(c, 1009, 'oversized message');
  c = await open();
  c.send({ id: 1, subscribe: { channel: 'server#1' } });
  const m = await expectMsg(c, 'subscribe before connect');
  if (!m.error || m.error.code !== 101) fail(`expected error 101, got ${JSON.stringify(m)}`);
  c.ws.close();
}

async function subscribe(c, id, sub) {
  c.send({ id, subscribe: sub });
  return expectMsg(c, `subscribe ${JSON.stringify(sub)}`);
}

async function unsubscribe(c, id) {
  c.send({ id, unsubscribe: { channel: 'server#1' } });
  const m = await expectMsg(c, 'unsubscribe');
  if (m.id !== id || !m.unsubscribe) fail(`bad unsubscribe reply ${JSON.stringify(m)}`);
}

async function recover() {
  const top = Number(arg);
  const c = await open();
  await connect(c);
  const cases = [
    // [request, recovered, publications]
    [{ recover: true, epoch: 'e1', offset: top }, true, 0],
    [{ recover: true, epoch: 'e1', offset: top - 1 }, true, 1],
    [{ recover: true, epoch: 'e1', offset: top - 2 }, false, 1],
    [{ recover: true, epoch: 'other', offset: top }, false, 1],
  ];
  let id = 2;
  for (const [req, recovered, pubs] of cases) {
    const m = await subscribe(c, id, { channel: 'server#1', ...req });
    const r = m.subscribe;
    if (m.id !== id || !r || r.epoch !== 'e1' || r.offset !== top || r.recoverable !== true)
      fail(`bad subscribe reply ${JSON.stringify(m)}`);
    if (Boolean(r.recovered) !== recovered || (r.publications || []).length !== pubs)
      fail(`recovery of ${JSON.stringify(req)}: ${JSON.stringify(r)}`);
    if (pubs && (r.publications[0].offset !== top ||
                 r.publications[0].data.EventType !== 'AllocateEventType'))
      fail(`bad recovered publication ${JSON.stringify(r.publications[0])}`);
    await unsubscribe(c, id + 1);
    id += 2;
  }
  // Fresh: the reply, then the allocation pushed.
  let m = await subscribe(c, id++, { channel: 'server#1' });
  if (!m.subscribe || m.subscribe.offset !== top || m.subscribe.publications)
    fail(`bad fresh subscribe reply ${JSON.stringify(m)}`);
  m = await expectMsg(c, 'allocation pushed after a fresh subscribe');
  const d = m.push && m.push.pub && m.push.pub.data;
  if (m.push.channel !== 'server#1' || m.push.pub.offset !== top || !d ||
      Object.keys(d).join() !== 'EventType,EventID,ServerID,AllocationID' ||
      d.EventType !== 'AllocateEventType' || d.ServerID !== 1)
    fail(`bad push ${JSON.stringify(m)}`);
  const errors = [
    [{ channel: 'server#1' }, 105],
    [{ channel: 'foo' }, 102],
    [{ channel: 'server#01' }, 102],
    [{ channel: 'server#2' }, 103],
  ];
  for (const [sub, code] of errors) {
    m = await subscribe(c, id, sub);
    if (m.id !== id || !m.error || m.error.code !== code)
      fail(`${JSON.stringify(sub)}: expected error ${code}, got ${JSON.stringify(m)}`);
    id++;
  }
  c.send({ id, ping: {} });
  m = await expectMsg(c, 'ping reply');
  if (m.id !== id || !m.ping) fail(`bad ping reply ${JSON.stringify(m)}`);
  c.send({ id: id + 1, publish: { channel: 'server#1', data: {} } });
  m = await expectMsg(c, 'unsupported method');
  if (!m.error || m.error.code !== 104) fail(`expected error 104, got ${JSON.stringify(m)}`);
  c.ws.close();
}

async function held() {
  const top = Number(arg);
  const c = await open();
  await connect(c);
  c.send({ id: 2, subscribe: { channel: 'server#1' } });
  process.stdout.write('{"subscribing":true}\n');
  const m = await expectMsg(c, 'held subscribe reply', 10000);
  if (m.id !== 2 || !m.subscribe || m.subscribe.offset !== top)
    fail(`bad held subscribe reply ${JSON.stringify(m)}`);
  const p = await expectMsg(c, 'the event that came while held', 10000);
  if (!p.push || p.push.pub.offset !== top + 1)
    fail(`expected the publication at ${top + 1}, got ${JSON.stringify(p)}`);
  c.ws.close();
}

async function ping() {
  const c = await open();
  await connect(c);
  const m = await expectMsg(c, 'the server ping', 30000);
  if (JSON.stringify(m) !== '{}') fail(`expected {}, got ${JSON.stringify(m)}`);
  await expectClose(c, 1006, 'the close after an unanswered ping', 15000);
}

async function stall() {
  const c = await open();
  await connect(c);
  const m = await subscribe(c, 2, { channel: 'server#1' });
  if (!m.subscribe) fail(`subscribe failed ${JSON.stringify(m)}`);
  c.ws.pause();
  process.stdout.write(JSON.stringify({ port: c.ws._socket.localPort }) + '\n');
  setInterval(() => {}, 1000);
}

const modes = { bad, recover, held, ping, stall };
if (!modes[mode] || !port) fail('usage: proxy-ws-check.mjs bad|recover|held|ping|stall PORT [ARG]');
modes[mode]().then(() => { if (mode !== 'stall') process.exit(0); }, (e) => fail(String(e)));
