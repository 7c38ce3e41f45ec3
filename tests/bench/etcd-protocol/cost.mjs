// SPDX-License-Identifier: MIT
// node cost.mjs ENDPOINT ETCD_PID CLK_TCK N
// etcd's own CPU (utime + stime of ETCD_PID, /proc) per operation, for the same operations
// sent by this one process through etcd's JSON gateway (HTTP/1.1 keep-alive, node's http) and
// through its gRPC API (the etcd3 package, @grpc/grpc-js): a put, a claim-shaped transaction
// (compare create_revision == 0; put a record and an index; else range the record) and a
// range of one 200-byte key, each N times, with 1 and with 32 in flight. Prints one JSON object a line.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { Etcd3 } from 'etcd3';

const [endpoint, pidArg, tckArg, nArg] = process.argv.slice(2);
const pid = Number(pidArg), tck = Number(tckArg), N = Number(nArg);
const url = new URL(endpoint);
const record = 'r'.repeat(300), index = 'i'.repeat(60), value = 'v'.repeat(200);

function etcdCpuSeconds() {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' '); // f[0] is the state (field 3)
    return (Number(f[11]) + Number(f[12])) / tck; // utime, stime (fields 14, 15)
}

const b64 = (s) => Buffer.from(s).toString('base64');
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
function gateway(path, body) {
    const data = JSON.stringify(body);
    return new Promise((resolve, reject) => {
        const req = http.request({ host: url.hostname, port: url.port, path, method: 'POST', agent,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } },
        (res) => {
            let out = '';
            res.on('data', (c) => { out += c; });
            res.on('end', () => (res.statusCode === 200 ? resolve(out)
                : reject(new Error(`${path}: HTTP ${res.statusCode} ${out}`))));
        });
        req.on('error', reject);
        req.end(data);
    });
}

const gw = {
    put: (k) => gateway('/v3/kv/put', { key: b64(k), value: b64(value) }),
    txn: (k) => gateway('/v3/kv/txn', {
        compare: [{ key: b64(`${k}/rec`), target: 'CREATE', result: 'EQUAL', create_revision: '0' }],
        success: [{ request_put: { key: b64(`${k}/rec`), value: b64(record) } },
            { request_put: { key: b64(`${k}/idx`), value: b64(index) } }],
        failure: [{ request_range: { key: b64(`${k}/rec`) } }],
    }),
    range: () => gateway('/v3/kv/range', { key: b64('/bench/fixed') }),
};
const client = new Etcd3({ hosts: endpoint });
const grpc = {
    put: (k) => client.put(k).value(value).exec(),
    txn: (k) => client.if(`${k}/rec`, 'Create', '==', 0)
        .then(client.put(`${k}/rec`).value(record), client.put(`${k}/idx`).value(index))
        .else(client.get(`${k}/rec`)).commit(),
    range: () => client.get('/bench/fixed').exec(),
};

async function run(fn, prefix, inflight, n) {
    let next = 0;
    const worker = async () => {
        while (next < n) {
            const i = next++;
            await fn(`/bench/${prefix}/${i}`);
        }
    };
    await Promise.all(Array.from({ length: inflight }, worker));
}

await gw.put('/bench/fixed');
let round = 0;
for (const inflight of [1, 32]) {
    for (const op of ['put', 'txn', 'range']) {
        for (const [name, proto] of [['gateway', gw], ['grpc', grpc]]) {
            const prefix = `${name}-${op}-${inflight}-${round++}`;
            await run(proto[op], `${prefix}/warm`, inflight, 200);
            const c0 = etcdCpuSeconds(), t0 = process.hrtime.bigint();
            await run(proto[op], prefix, inflight, N);
            const wall = Number(process.hrtime.bigint() - t0) / 1e9, cpu = etcdCpuSeconds() - c0;
            console.log(JSON.stringify({ protocol: name, op, inflight, n: N,
                etcd_cpu_ms_per_op: +(cpu * 1000 / N).toFixed(3), ops_per_sec: +(N / wall).toFixed(0) }));
        }
    }
}
client.close();
agent.destroy();
