// Servers for the Node.js client tests: the real `ruvio` binary and a real
// redis-server, each on fresh free ports, started and killed by the tests.
//
// Every test file runs the same body against both in one run (see `targets`): Ruvio
// (forward mode with 1 or 2 shards, or per-shard mode) and redis-server (standalone,
// or a Redis Cluster of N masters owning the same slot ranges as Ruvio's shards), so
// an expectation that Redis does not meet is a bug in the test, not in Ruvio.
//
// The binary is $RUVIO_BIN, else target/release/ruvio, else target/debug/ruvio of
// this repository (as tests/python/support.py). redis-server is $REDIS_SERVER_BIN or
// the one on PATH.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const REPO = path.resolve(__dirname, '..', '..', '..');
const SLOT_COUNT = 16384;
const STARTUP_TIMEOUT_MS = 30_000;
// Primaries from here, Redis Cluster bus ports at +10000: away from the ranges of
// the Rust harness (10000-20000) and the Python one (20000-30000).
const PORT_FIRST = 30_000;
const PORT_END = 32_000;
const BUS_OFFSET = 10_000;

function ruvioBin() {
  if (process.env.RUVIO_BIN) return process.env.RUVIO_BIN;
  for (const profile of ['release', 'debug']) {
    const candidate = path.join(REPO, 'target', profile, 'ruvio');
    if (fs.existsSync(candidate)) return candidate;
  }
  throw new Error('no ruvio binary: set RUVIO_BIN or run cargo build --release -p ruvio-server');
}

function redisServerBin() {
  return process.env.REDIS_SERVER_BIN || 'redis-server';
}

function portFree(port) {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.listen({ port, host: '127.0.0.1', exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

let nextPort = PORT_FIRST + ((process.pid * 7919 + Date.now()) % (PORT_END - PORT_FIRST - 200));

// `count` consecutive free ports (and their bus ports when `withBus`). Ports only
// move forward within a run: a listener can outlive its process for a moment.
async function freePorts(count, withBus = false) {
  for (let tries = 0; tries < PORT_END - PORT_FIRST; tries++) {
    if (nextPort + count >= PORT_END) nextPort = PORT_FIRST;
    const ports = Array.from({ length: count }, (_, i) => nextPort + i);
    nextPort += count;
    let free = true;
    for (const p of ports) {
      if (!(await portFree(p)) || (withBus && !(await portFree(p + BUS_OFFSET)))) {
        free = false;
        break;
      }
    }
    if (free) return ports;
  }
  throw new Error('no free ports');
}

// End of the complete RESP2 frame starting at `at` of `buf`, or -1 while incomplete.
function frameEnd(buf, at = 0) {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return -1;
  const kind = String.fromCharCode(buf[at]);
  const header = Number(buf.subarray(at + 1, eol).toString());
  let after = eol + 2;
  if ('+-:'.includes(kind)) return after;
  if (kind === '$') {
    if (header < 0) return after;
    return buf.length >= after + header + 2 ? after + header + 2 : -1;
  }
  if (kind === '*') {
    for (let i = 0; i < header && after >= 0; i++) after = frameEnd(buf, after);
    return after;
  }
  throw new Error(`bad RESP type in ${buf}`);
}

// One command over a fresh socket; resolves with the raw reply as text.
function rawCommand(port, args, timeoutMs = 2000) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    let data = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no reply on ${port}`));
    }, timeoutMs);
    socket.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.on('connect', () => {
      let request = `*${args.length}\r\n`;
      for (const a of args) request += `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`;
      socket.write(request);
    });
    socket.on('data', (chunk) => {
      data = Buffer.concat([data, chunk]);
      if (data.length > 0 && frameEnd(data) === data.length) {
        clearTimeout(timer);
        socket.end();
        resolve(data.toString());
      }
    });
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class Server {
  constructor(kind, mode, shards, ports) {
    this.kind = kind;
    this.mode = mode;
    this.shards = shards;
    this.ports = ports;
    this.procs = [];
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), `ruvio-node-${kind}-`));
    this.logs = [];
  }

  get port() {
    return this.ports[0];
  }

  // ioredis Cluster start nodes.
  get nodes() {
    return this.ports.map((port) => ({ host: '127.0.0.1', port }));
  }

  spawn(argv, name) {
    const log = path.join(this.dir, `${name}.log`);
    const fd = fs.openSync(log, 'w');
    const proc = spawn(argv[0], argv.slice(1), { stdio: ['ignore', fd, fd] });
    fs.closeSync(fd);
    this.procs.push(proc);
    this.logs.push(log);
  }

  logTail() {
    return this.logs.map((log) => `--- ${log} ---\n${fs.readFileSync(log, 'utf8').slice(-4000)}`).join('\n');
  }

  async waitReady() {
    const deadline = Date.now() + STARTUP_TIMEOUT_MS;
    for (const port of this.ports) {
      for (;;) {
        const exited = this.procs.find((p) => p.exitCode !== null || p.signalCode !== null);
        if (exited) throw new Error(`server exited (${exited.exitCode})\n${this.logTail()}`);
        if ((await rawCommand(port, ['PING']).catch(() => '')) === '+PONG\r\n') break;
        if (Date.now() > deadline) throw new Error(`no PONG on ${port}\n${this.logTail()}`);
        await sleep(20);
      }
    }
  }

  async stop() {
    await Promise.all(
      this.procs.map(
        (proc) =>
          new Promise((resolve) => {
            if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
            proc.once('exit', resolve);
            proc.kill('SIGKILL');
          }),
      ),
    );
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

// Ruvio with `shards` shards in `mode` ('forward' or 'per-shard'), in memory.
async function startRuvio(mode, shards) {
  const ports = await freePorts(mode === 'forward' ? 1 : shards);
  const server = new Server('ruvio', mode, shards, ports);
  server.spawn(
    [ruvioBin(), '--bind', '127.0.0.1', '--port', String(ports[0]), '--shards', String(shards),
      '--port-mode', mode, '--durability', 'memory'],
    'ruvio',
  );
  await server.waitReady();
  return server;
}

function redisArgv(port, dir) {
  return [redisServerBin(), '--port', String(port), '--bind', '127.0.0.1', '--save', '',
    '--appendonly', 'no', '--dir', dir];
}

async function startRedis() {
  const [port] = await freePorts(1);
  const server = new Server('redis', 'forward', 1, [port]);
  server.spawn(redisArgv(port, server.dir), 'redis');
  await server.waitReady();
  return server;
}

// Slots [lo, hi) of shard i of n, as Ruvio assigns them.
function slotRange(i, n) {
  return [Math.floor((i * SLOT_COUNT) / n), Math.floor(((i + 1) * SLOT_COUNT) / n)];
}

// A Redis Cluster of `masters` redis-servers, master i owning Ruvio's shard i slots.
async function startRedisCluster(masters) {
  const ports = await freePorts(masters, true);
  const server = new Server('redis', 'per-shard', masters, ports);
  for (const port of ports) {
    server.spawn(
      [...redisArgv(port, server.dir), '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`],
      `redis-${port}`,
    );
  }
  await server.waitReady();
  for (const [i, port] of ports.entries()) {
    const [lo, hi] = slotRange(i, masters);
    const reply = await rawCommand(port, ['CLUSTER', 'ADDSLOTSRANGE', lo, hi - 1]);
    if (reply !== '+OK\r\n') throw new Error(`ADDSLOTSRANGE on ${port}: ${reply}`);
  }
  for (const port of ports.slice(1)) await rawCommand(ports[0], ['CLUSTER', 'MEET', '127.0.0.1', port]);
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (const port of ports) {
    for (;;) {
      const info = await rawCommand(port, ['CLUSTER', 'INFO']);
      const slots = await rawCommand(port, ['CLUSTER', 'SLOTS']);
      if (info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${masters}`)
        && slots.startsWith(`*${masters}\r\n`)) break;
      if (Date.now() > deadline) throw new Error(`Redis Cluster not ok on ${port}: ${info}`);
      await sleep(100);
    }
  }
  return server;
}

// The servers a test file runs against: [{ name, start }] where `start()` resolves
// with a running Server. `layout` is 'forward' (Ruvio in forward mode with `shards`
// shards, and one standalone redis-server) or 'cluster' (Ruvio in per-shard mode with
// `shards` shards, and a Redis Cluster of as many masters).
function targets(layout, shards) {
  if (layout === 'forward') {
    return [
      { name: `ruvio forward ${shards} shard${shards > 1 ? 's' : ''}`, start: () => startRuvio('forward', shards) },
      { name: 'redis-server', start: startRedis },
    ];
  }
  return [
    { name: `ruvio per-shard ${shards} shards`, start: () => startRuvio('per-shard', shards) },
    { name: `redis cluster ${shards} masters`, start: () => startRedisCluster(shards) },
  ];
}

// CRC16 (XMODEM) of Redis Cluster, with hash tags: the slot of a key.
function keySlot(key) {
  let k = Buffer.from(key);
  const open = k.indexOf('{');
  if (open >= 0) {
    const close = k.indexOf('}', open + 1);
    if (close > open + 1) k = k.subarray(open + 1, close);
  }
  let crc = 0;
  for (const byte of k) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % SLOT_COUNT;
}

function shardOfKey(key, shards) {
  const slot = keySlot(key);
  for (let i = 0; i < shards; i++) {
    const [lo, hi] = slotRange(i, shards);
    if (slot >= lo && slot < hi) return i;
  }
  throw new Error('slot out of range');
}

// The first `${prefix}${n}` that lives on `shard` of `shards`.
function keyOnShard(prefix, shard, shards) {
  for (let n = 0; n < 100_000; n++) {
    if (shardOfKey(`${prefix}${n}`, shards) === shard) return `${prefix}${n}`;
  }
  throw new Error('no key found');
}

// Polls `check` (sync or async) until it returns a truthy value, or fails after `ms`.
async function eventually(check, ms = 10_000, what = 'condition') {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

module.exports = {
  targets, startRuvio, startRedis, startRedisCluster, keySlot, shardOfKey, keyOnShard, slotRange,
  eventually, sleep, rawCommand, Server, freePorts, ruvioBin, redisArgv,
};
