// What the ioredis `Cluster` tests through a reshard and a failover share
// (cluster_failover.test.js: per-shard nodes; cluster_forward_failover.test.js:
// forward-mode nodes of two shards): reading a node's view, redis-cli, counters
// spread over every slot and writers INCRing them without pause.
//
// The writers count per counter the acknowledged INCRs, the failed ones and the
// acknowledged ones since a mark, so a test can check at the end that every counter
// holds at least its acknowledged INCRs and at most those plus the failed ones (a
// failed one may have applied), and that the keys of moved or failed-over slots took
// writes after each step.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const { rawCommand, keySlot, eventually, sleep, ruvioBin, redisArgv } = require('./servers');

// As the Rust tests' nodes (tests/common/cluster_process.rs): PFAIL after 1 s, the
// replica elected about 2 s after the kill.
const NODE_TIMEOUT_MS = 1000;

// One node process of `kind` ('ruvio' or 'redis') on `port`, with the cluster bus,
// in its own directory under the server's; `ruvioLayout` says how a Ruvio process
// maps onto the node (`['--shards', '1']`, or forward mode's port and shards).
function spawnClusterNode(server, kind, port, ruvioLayout) {
  const dir = path.join(server.dir, String(port));
  fs.mkdirSync(dir);
  const timeout = ['--cluster-node-timeout', String(NODE_TIMEOUT_MS)];
  const argv = kind === 'ruvio'
    ? [ruvioBin(), '--bind', '127.0.0.1', '--port', String(port), ...ruvioLayout, '--durability', 'memory',
      '--dir', dir, '--cluster-enabled', 'yes', ...timeout]
    : [...redisArgv(port, dir), '--cluster-enabled', 'yes', ...timeout];
  server.spawn(argv, `${kind}-${port}`);
}

function redisCliBin() {
  return process.env.REDIS_CLI_BIN || 'redis-cli';
}

// The text of a bulk string reply.
function bulkText(reply) {
  return reply.slice(reply.indexOf('\r\n') + 2, reply.lastIndexOf('\r\n'));
}

async function clusterNodes(port) {
  return bulkText(await rawCommand(port, ['CLUSTER', 'NODES'])).split('\n').filter(Boolean);
}

async function myId(port) {
  return bulkText(await rawCommand(port, ['CLUSTER', 'MYID']));
}

async function infoField(port, section, name) {
  const info = bulkText(await rawCommand(port, ['INFO', section]));
  const line = info.split('\r\n').find((l) => l.startsWith(`${name}:`));
  return line === undefined ? undefined : line.slice(name.length + 1);
}

async function ok(port, args) {
  const reply = await rawCommand(port, args);
  if (reply !== '+OK\r\n') throw new Error(`${args.join(' ')} on ${port}: ${reply}`);
}

// Every node agrees on the `ports.length` nodes and says `ok`; the current epochs are
// one and the `masters` masters' config epochs distinct (a new cluster's collisions
// resolved), so every vote of an election can be granted.
async function settled(ports, masters) {
  for (const port of ports) {
    const info = bulkText(await rawCommand(port, ['CLUSTER', 'INFO']));
    if (!info.includes('cluster_state:ok') || !info.includes(`cluster_known_nodes:${ports.length}`)) return false;
    const lines = await clusterNodes(port);
    if (lines.length !== ports.length || lines.some((l) => !l.includes(' connected'))) return false;
  }
  const epochs = new Set();
  for (const port of ports) {
    epochs.add(bulkText(await rawCommand(port, ['CLUSTER', 'INFO'])).match(/cluster_current_epoch:(\d+)/)[1]);
  }
  const configEpochs = new Set((await clusterNodes(ports[0])).filter((l) => l.split(' ').length > 8)
    .map((l) => l.split(' ')[6]));
  return epochs.size === 1 && configEpochs.size === masters;
}

// The slot ranges ([lo, hi]) of the node whose CLUSTER NODES line is `line`.
function lineRanges(line) {
  return line.split(' ').slice(8).filter((range) => !range.startsWith('['))
    .map((range) => {
      const [lo, hi = lo] = range.split('-').map(Number);
      return [lo, hi];
    });
}

function within(ranges, slot) {
  return ranges.some(([lo, hi]) => slot >= lo && slot <= hi);
}

// The slot ranges `port` says it serves itself.
async function ownRanges(port) {
  const me = (await clusterNodes(port)).find((l) => l.includes('myself'));
  return me ? lineRanges(me) : [];
}

// The node (`host:port`) that `port` says serves `slot`.
async function ownerOf(port, slot) {
  const owner = (await clusterNodes(port)).find((l) => within(lineRanges(l), slot));
  return owner && owner.split(' ')[1].split('@')[0];
}

function redisCli(args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(redisCliBin(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (d) => { out += d; });
    proc.stderr.on('data', (d) => { out += d; });
    proc.on('error', reject);
    proc.on('exit', (code) => (code === 0 && !out.includes('[ERR]')
      ? resolve(out) : reject(new Error(`redis-cli ${args.join(' ')}: ${code}\n${out}`))));
  });
}

// `count` keys, one in each 1/count-th of the slots, so every master and any
// resharded range of slots has some.
function spreadKeys(count) {
  const keys = [];
  let n = 0;
  for (let bucket = 0; bucket < count; bucket++) {
    const [lo, hi] = [Math.floor((bucket * 16384) / count), Math.floor(((bucket + 1) * 16384) / count)];
    for (;; n++) {
      const slot = keySlot(`counter:${n}`);
      if (slot >= lo && slot < hi) break;
    }
    keys.push(`counter:${n}`);
    n++;
  }
  return keys;
}

// `writers` loops INCRing the keys round robin through `cluster` until stopped, each
// key at most once at a time; per key the acknowledged INCRs, the failed ones, and
// the acknowledged ones since `mark()`. `hold(slotHeld)` keeps them from the keys of
// the slots `slotHeld` accepts (resolving when none is in flight) until `release()`.
function startWriters(cluster, keys, writers) {
  const state = keys.map((key) => ({
    key, slot: keySlot(key), acked: 0, failed: 0, ackedSinceMark: 0, busy: false,
  }));
  let next = 0;
  let stopped = false;
  let held = () => false;
  const errors = new Map();
  const pick = () => {
    for (let tries = 0; tries < state.length; tries++) {
      const s = state[next++ % state.length];
      if (!s.busy && !held(s.slot)) return s;
    }
    return undefined;
  };
  const writer = async () => {
    while (!stopped) {
      const s = pick();
      if (!s) {
        await sleep(5);
        continue;
      }
      s.busy = true;
      try {
        await cluster.incr(s.key);
        s.acked++;
        s.ackedSinceMark++;
      } catch (e) {
        s.failed++;
        const shape = e.message.replace(/\d+/g, 'N');
        errors.set(shape, (errors.get(shape) ?? 0) + 1);
        await sleep(20);
      } finally {
        s.busy = false;
      }
    }
  };
  const running = Array.from({ length: writers }, writer);
  return {
    state,
    errors,
    total: () => state.reduce((sum, s) => sum + s.acked, 0),
    mark: () => state.forEach((s) => { s.ackedSinceMark = 0; }),
    hold: (slotHeld) => {
      held = slotHeld;
      return eventually(() => !state.some((s) => s.busy && slotHeld(s.slot)), 20_000,
        'the held INCRs answered');
    },
    release: () => { held = () => false; },
    stop: async () => {
      stopped = true;
      await Promise.all(running);
    },
  };
}

// Kills `proc` with SIGKILL (as `kill -9`); resolves once it exited.
function killHard(proc) {
  return new Promise((resolve) => {
    proc.once('exit', resolve);
    proc.kill('SIGKILL');
  });
}

module.exports = {
  NODE_TIMEOUT_MS,
  spawnClusterNode,
  bulkText,
  clusterNodes,
  myId,
  infoField,
  ok,
  settled,
  within,
  ownRanges,
  ownerOf,
  redisCli,
  spreadKeys,
  startWriters,
  killHard,
};
