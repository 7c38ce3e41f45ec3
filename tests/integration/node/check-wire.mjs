#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// Proves that the frames of localproxy/centrifuge.c are what the real Centrifuge clients
// accept, and that it parses what they send: a WebSocket server on a free loopback port hands
// every client message to centrifuge-echo (our parser and encoders, tests/integration) and
// sends back what it prints; centrifuge-client.mjs then runs centrifuge-js 2.x (protocol v1)
// and 5.x (protocol v2) against it. For each client:
//   1. connect with a token, subscribe: subscribed, not recovered; the publication of
//      offset 1 arrives with its data exactly; 2.x pings (v1 ping reply) and keeps going, 5.x
//      answers our ping with a pong;
//   2. the server drops the connection: the client reconnects and resubscribes recovering
//      from offset 1 with our epoch; the reply recovers the publication of offset 2;
//   3. SIGTERM: the client unsubscribes, which we parse;
//   4. a channel we refuse: the client reports the error reply's code and message.
// The first frames of each client are printed, as the proxy's evidence of what they send.
//
//   CENTRIFUGE_ECHO=build/tests/integration/centrifuge-echo node check-wire.mjs
// Exits 0 when all holds, 1 when not, 77 (skipped) without node_modules.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));
for (const m of ['ws', 'centrifuge2', 'centrifuge5']) {
  if (!existsSync(path.join(here, 'node_modules', m, 'package.json'))) {
    console.log(`skipped: ${path.join(here, 'node_modules', m)} is missing (tests/deps.sh runs npm ci)`);
    process.exit(77);
  }
}
const echoPath = process.env.CENTRIFUGE_ECHO;
if (!echoPath || !existsSync(echoPath)) {
  console.error('check-wire: set CENTRIFUGE_ECHO to the built centrifuge-echo');
  process.exit(1);
}
const { WebSocketServer } = await import('ws');

const CHANNEL = 'server#3';
const REFUSED = 'server#4';
const EPOCH = 'e-1700000000';
const TOKEN = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIzIn0.c2lnbmF0dXJl';
const DATA = [
  { EventType: 'AllocateEventType', EventID: '6f4b2a34-1c3e-4b8e-9d59-0c2a5e7d9f10',
    ServerID: 3, AllocationID: '9d1b4c8e-2f6a-4e3b-8a7d-5c9e0f1a2b3c' },
  { EventType: 'DeallocateEventType', EventID: '0a8f3c2d-5b7e-4f1a-9c6d-2e4b8a0f1c3d',
    ServerID: 3, AllocationID: '9d1b4c8e-2f6a-4e3b-8a7d-5c9e0f1a2b3c' },
];
const WAIT_MS = 15000;

let failures = 0;
function check(ok, what, detail) {
  console.log(`${ok ? 'ok' : 'not ok'} - ${what}`);
  if (!ok) {
    failures++;
    if (detail !== undefined) console.log(`  # ${JSON.stringify(detail)}`);
  }
  return ok;
}

// Everything a run observes; `changed` fires on every addition so that waits re-check.
class Run extends EventEmitter {
  constructor(major) {
    super();
    this.major = major;
    this.connections = [];      // { ws, received: [text], sent: [text], notes: [{…}] }
    this.events = [];           // the client's lines
    this.stderr = '';
  }

  until(predicate, what) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.off('changed', test);
        reject(new Error(`timed out waiting for ${what}`));
      }, WAIT_MS);
      const test = () => {
        if (!predicate()) return;
        clearTimeout(timer);
        this.off('changed', test);
        resolve();
      };
      this.on('changed', test);
      test();
    });
  }

  notes(i, method) {
    return (this.connections[i]?.notes ?? []).filter((n) => n.method === method);
  }

  eventsOf(kind) {
    return this.events.filter((e) => e.event === kind);
  }
}

// One centrifuge-echo per WebSocket connection, as the proxy keeps one parser state each.
function serve(run, wss) {
  wss.on('connection', (ws) => {
    const conn = { ws, received: [], sent: [], notes: [] };
    run.connections.push(conn);
    const echo = spawn(echoPath, ['--epoch', EPOCH, '--ping', '25', '--refuse', REFUSED,
      '--data', JSON.stringify(DATA[0]), '--data', JSON.stringify(DATA[1])],
    { stdio: ['pipe', 'pipe', 'inherit'] });
    createInterface({ input: echo.stdout }).on('line', (line) => {
      if (line.startsWith('# ')) {
        conn.notes.push(JSON.parse(line.slice(2)));
      } else {
        const text = JSON.parse(line);
        conn.sent.push(text);
        if (ws.readyState === ws.OPEN) ws.send(text);
      }
      run.emit('changed');
    });
    ws.on('message', (data, isBinary) => {
      const text = data.toString('utf8');
      conn.received.push(isBinary ? `(binary) ${text}` : text);
      echo.stdin.write(JSON.stringify(text) + '\n');
      run.emit('changed');
    });
    ws.on('close', () => echo.stdin.end());
  });
}

function startClient(run, url, channel) {
  const child = spawn(process.execPath, [path.join(here, 'centrifuge-client.mjs'),
    '--client', run.major, '--url', url, '--channel', channel, '--token', TOKEN,
    '--timeout-ms', '5000', '--ping-interval-ms', '300'], { stdio: ['ignore', 'pipe', 'pipe'] });
  createInterface({ input: child.stdout }).on('line', (line) => {
    run.events.push(JSON.parse(line));
    run.emit('changed');
  });
  child.stderr.on('data', (d) => { run.stderr += d; });
  return child;
}

async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  child.kill('SIGTERM');
  const [code] = await once(child, 'exit');
  return code;
}

function sameData(got, expected) {
  // Exactly: the same members in the same order, as JSON text.
  return JSON.stringify(got) === JSON.stringify(expected);
}

async function checkSubscription(run, url) {
  const v = run.major === '2' ? 1 : 2;
  const client = startClient(run, url, CHANNEL);
  try {
    await run.until(() => run.eventsOf('publication').length >= 1, 'the first publication');
    const sub = run.eventsOf('subscribed')[0];
    check(run.eventsOf('connected').length === 1, `${run.major}.x: connected`, run.events);
    check(sub?.channel === CHANNEL && sub.recovered === false, `${run.major}.x: subscribed, not recovered`, sub);
    const pub = run.eventsOf('publication')[0];
    check(sameData(pub.data, DATA[0]) && pub.offset === 1, `${run.major}.x: publication 1 exactly`, pub);

    if (v === 1) {
      await run.until(() => run.notes(0, 'ping').length >= 2, 'two v1 pings');
      check(true, '2.x: pings again after our ping reply');
    } else {
      await run.until(() => run.notes(0, 'pong').length >= 1, 'a pong');
      check(true, '5.x: answers our ping with a pong');
    }

    run.connections[0].ws.terminate();
    await run.until(() => run.eventsOf('publication').length >= 2, 'the recovered publication');
    check(run.eventsOf('disconnected')[0]?.reconnect === true, `${run.major}.x: saw the drop, reconnects`, run.events);
    const resub = run.eventsOf('subscribed')[1];
    check(resub?.recovered === true, `${run.major}.x: resubscribed, recovered`, resub);
    const missed = run.eventsOf('publication')[1];
    check(sameData(missed.data, DATA[1]) && missed.offset === 2, `${run.major}.x: publication 2 recovered exactly`, missed);

    const code = await stop(client);
    check(code === 0, `${run.major}.x: exits 0 on SIGTERM`, { code, stderr: run.stderr });
    await run.until(() => run.notes(1, 'unsubscribe').length >= 1, 'the unsubscribe').catch(() => {});
  } finally {
    await stop(client);
  }

  const [c0, c1] = [run.connections[0]?.notes ?? [], run.connections[1]?.notes ?? []];
  check(c0[0]?.method === 'connect' && c0[0].version === v && c0[0].id > 0 && c0[0].has_token,
    `${run.major}.x: parsed its connect as v${v}, with the token`, c0[0]);
  check(c0[1]?.method === 'subscribe' && c0[1].channel === CHANNEL && !c0[1].recover,
    `${run.major}.x: parsed its subscribe`, c0[1]);
  check(c1[1]?.method === 'subscribe' && c1[1].recover && c1[1].epoch === EPOCH && c1[1].offset === 1,
    `${run.major}.x: parsed its recovering subscribe (epoch, offset 1)`, c1[1]);
  check(run.notes(1, 'unsubscribe')[0]?.channel === CHANNEL, `${run.major}.x: parsed its unsubscribe`, c1);
  const refused = run.connections.flatMap((c) => c.notes).filter((n) => n.error);
  check(refused.length === 0, `${run.major}.x: every frame parsed`, refused);
  check(run.eventsOf('error').length === 0, `${run.major}.x: no error reported`, run.eventsOf('error'));
}

// A refused subscribe: our error reply reaches the application with its code and message,
// as a subscription error (2.x) or, the code being permanent (>= 100, not 109), as the end of
// the subscription (5.x).
async function checkRefused(run, url) {
  const client = startClient(run, url, REFUSED);
  const kind = run.major === '2' ? 'error' : 'unsubscribed';
  try {
    await run.until(() => run.eventsOf(kind).length >= 1, `the subscribe error (${kind})`);
    const e = run.eventsOf(kind)[0];
    check(e.channel === REFUSED && e.code === 103 && (e.message ?? e.reason) === 'permission denied',
      `${run.major}.x: reports the error reply (103 permission denied)`, e);
  } finally {
    await stop(client);
  }
}

function printFrames(run) {
  console.log(`# centrifuge-js ${run.major}.x, what it sent:`);
  run.connections.forEach((c, i) => {
    for (const text of c.received) console.log(`#   connection ${i + 1} <- ${JSON.stringify(text)}`);
  });
  console.log(`# and what we sent it:`);
  run.connections.forEach((c, i) => {
    for (const text of c.sent) console.log(`#   connection ${i + 1} -> ${JSON.stringify(text)}`);
  });
}

async function runMajor(major, scenario) {
  const run = new Run(major);
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/v1/connection/websocket' });
  await once(wss, 'listening');
  serve(run, wss);
  const url = `ws://127.0.0.1:${wss.address().port}/v1/connection/websocket`;
  try {
    await scenario(run, url);
  } catch (e) {
    check(false, `${major}.x: ${e.message}`, { events: run.events, stderr: run.stderr });
  } finally {
    for (const c of run.connections) c.ws.terminate();
    wss.close();
  }
  return run;
}

for (const major of ['2', '5']) {
  const run = await runMajor(major, checkSubscription);
  printFrames(run);
  await runMajor(major, checkRefused);
}
console.log(failures === 0 ? 'check-wire: all passed' : `check-wire: ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
