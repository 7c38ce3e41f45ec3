#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// A real Centrifuge client, as a Multiplay SDK game server runs one: connects, subscribes to
// one channel and prints one JSON line per event on stdout, until SIGTERM.
//
//   node centrifuge-client.mjs --client 2|5 --url ws://HOST:PORT/v1/connection/websocket
//        --channel 'server#N' [--token T] [--timeout-ms N] [--ping-interval-ms N]
//
// --client 2 is centrifuge-js 2.x (protocol v1, what centrifuge-go 0.8 speaks), 5 is 5.x
// (protocol v2). --timeout-ms (default 5000) is the clients' wait for a reply, and the wait for
// the subscription's first answer (subscribed, or refused: a subscription error in 2.x, an
// unsubscribed event with the server's code in 5.x), after which the script exits 1.
// --ping-interval-ms sets how often 2.x pings (its default is 25 s); 5.x waits for the
// server's pings instead.
//
// Events, one line each:
//   {"event":"connected","client":ID}
//   {"event":"subscribed","channel":C,"recovered":B,"resubscribed":B,"offset":N,"epoch":E}
//   {"event":"publication","data":{…},"offset":N}
//   {"event":"unsubscribed","channel":C,…}
//   {"event":"disconnected","reason":R,"reconnect":B,…}   reconnect: the client will try again
//   {"event":"error","message":M,…}
// stdout to a pipe or a file is written synchronously by node on Linux: a line is out when
// the event handler returns.
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';

const require = createRequire(import.meta.url);

function emit(event, fields) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

function usage(message) {
  process.stderr.write(`centrifuge-client: ${message}\n` +
    'usage: centrifuge-client.mjs --client 2|5 --url URL --channel CHANNEL [--token T] ' +
    '[--timeout-ms N] [--ping-interval-ms N]\n');
  process.exit(2);
}

function parseOptions() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        client: { type: 'string' },
        url: { type: 'string' },
        channel: { type: 'string' },
        token: { type: 'string' },
        'timeout-ms': { type: 'string', default: '5000' },
        'ping-interval-ms': { type: 'string', default: '25000' },
      },
    }));
  } catch (e) {
    usage(e.message);
  }
  if (values.client !== '2' && values.client !== '5') usage('--client must be 2 or 5');
  if (!values.url) usage('--url is required');
  if (!values.channel) usage('--channel is required');
  const timeout = Number(values['timeout-ms']);
  const pingInterval = Number(values['ping-interval-ms']);
  if (!(timeout > 0) || !(pingInterval > 0)) usage('a time must be a positive number');
  return { ...values, timeout, pingInterval };
}

function errorFields(e) {
  if (!e) return {};
  return { code: e.code, message: e.message ?? String(e) };
}

// centrifuge-js 2.x: protocol v1.
function startV1(o) {
  const Centrifuge = require('centrifuge2');
  const client = new Centrifuge(o.url, {
    websocket: WebSocket,
    timeout: o.timeout,
    pingInterval: o.pingInterval,
    minRetry: 100,
    maxRetry: 2000,
  });
  if (o.token) client.setToken(o.token);
  client.on('connect', (ctx) => emit('connected', { client: ctx.client }));
  client.on('disconnect', (ctx) => emit('disconnected', { reason: ctx.reason, reconnect: ctx.reconnect }));
  client.on('error', (ctx) => emit('error', errorFields(ctx.error ?? ctx)));
  const sub = client.subscribe(o.channel);
  sub.on('subscribe', (ctx) => emit('subscribed', {
    channel: ctx.channel,
    recovered: ctx.recovered === true,
    resubscribed: ctx.isResubscribe === true,
    offset: ctx.streamPosition?.offset ?? null,
    epoch: ctx.streamPosition?.epoch ?? null,
  }));
  sub.on('publish', (ctx) => emit('publication', { data: ctx.data, offset: ctx.offset ?? null }));
  sub.on('error', (ctx) => emit('error', { channel: ctx.channel, ...errorFields(ctx) }));
  sub.on('unsubscribe', (ctx) => emit('unsubscribed', { channel: ctx.channel }));
  client.connect();
  return { client, sub };
}

// centrifuge-js 5.x: protocol v2.
async function startV2(o) {
  const { Centrifuge } = await import('centrifuge5');
  const client = new Centrifuge(o.url, {
    websocket: WebSocket,
    token: o.token,
    timeout: o.timeout,
    minReconnectDelay: 100,
    maxReconnectDelay: 2000,
  });
  let connected = false;
  client.on('connected', (ctx) => {
    connected = true;
    emit('connected', { client: ctx.client });
  });
  // 5.x reports a lost connection it will retry as 'connecting', and only the end of all
  // retries as 'disconnected'.
  client.on('connecting', (ctx) => {
    if (connected) emit('disconnected', { reason: ctx.reason, code: ctx.code, reconnect: true });
    connected = false;
  });
  client.on('disconnected', (ctx) => {
    connected = false;
    emit('disconnected', { reason: ctx.reason, code: ctx.code, reconnect: false });
  });
  client.on('error', (ctx) => emit('error', { type: ctx.type, ...errorFields(ctx.error) }));
  const sub = client.newSubscription(o.channel);
  sub.on('subscribed', (ctx) => emit('subscribed', {
    channel: ctx.channel,
    recovered: ctx.recovered === true,
    resubscribed: ctx.wasRecovering === true,
    offset: ctx.streamPosition?.offset ?? null,
    epoch: ctx.streamPosition?.epoch ?? null,
  }));
  sub.on('publication', (ctx) => emit('publication', { data: ctx.data, offset: ctx.offset ?? null }));
  sub.on('error', (ctx) => emit('error', { channel: ctx.channel, type: ctx.type, ...errorFields(ctx.error) }));
  sub.on('unsubscribed', (ctx) => emit('unsubscribed', { channel: ctx.channel, code: ctx.code, reason: ctx.reason }));
  sub.subscribe();
  client.connect();
  return { client, sub };
}

async function main() {
  const o = parseOptions();
  const { client, sub } = o.client === '2' ? startV1(o) : await startV2(o);
  let subscribed = false;

  process.stdout.on('error', () => process.exit(0));   // the reader is gone
  const deadline = setTimeout(() => {
    emit('error', { message: `not subscribed within ${o.timeout} ms` });
    process.exit(1);
  }, o.timeout);
  const answered = () => clearTimeout(deadline);
  const onSubscribed = () => {
    subscribed = true;
    answered();
  };
  if (o.client === '2') {
    sub.on('subscribe', onSubscribed);
    sub.on('error', answered);
  } else {
    sub.on('subscribed', onSubscribed);
    sub.on('unsubscribed', answered);
  }

  // Unsubscribe and close as an application stopping would; the frames are on the socket
  // before the close, and the exit waits for nothing else.
  process.on('SIGTERM', () => {
    if (subscribed) sub.unsubscribe();
    client.disconnect();
    setTimeout(() => process.exit(0), 100);
  });
}

main().catch((e) => {
  emit('error', { message: String(e?.stack ?? e) });
  process.exit(1);
});
