// ioredis `Cluster` keeps working through a reshard and a failover of forward-mode
// nodes (issue 35; docs/cluster.md "In the binary: forward mode as one node"): six
// processes of two shards each (`ruvio --port-mode forward --shards 2
// --cluster-enabled yes`: one node per process, its shards splitting the node's
// slots), three masters and a replica of each, built by `redis-cli --cluster create
// --cluster-replicas 1` as an operator builds a Redis Cluster (six redis-servers for
// the same body). While an ioredis Cluster client INCRs 200 counters spread over all
// slots without pause:
//   a. `redis-cli --cluster reshard` moves 400 slots, keys and all, from one master
//      to another: ioredis follows the -ASK and -MOVED redirections;
//   b. the master that took them is killed with SIGKILL: its replica, which got the
//      moved keys over the replication stream, is elected, and ioredis refreshes its
//      slot map and writes on.
// At the end every counter holds at least its acknowledged INCRs and at most those
// plus the INCRs that failed (a failed one may have applied); the moved counters took
// writes after the reshard, and the killed master's after the failover.
//
// As in cluster_failover.test.js, replication is asynchronous: the writers hold back
// from the killed master's keys just before the kill, until its replica has
// everything the master acknowledged, and go back to them as soon as it is dead.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const { Cluster } = require('ioredis');

const { Server, freePorts, eventually } = require('./lib/servers');
const {
  spawnClusterNode, clusterNodes, myId, infoField, settled, within, ownRanges, ownerOf, redisCli, spreadKeys,
  startWriters, killHard,
} = require('./lib/cluster');

const NODES = 6;
const MASTERS = 3;
const SHARDS = 2;
// Each node a forward-mode Ruvio process of two shards (or a redis-server).
const RUVIO_LAYOUT = ['--port-mode', 'forward', '--shards', String(SHARDS)];
const KEYS = 200;
const WRITERS = 16;
// About five counters (one per 82 slots) move.
const RESHARD_SLOTS = 400;

// [{ port, id, masterId }] of the replicas, from `port`'s CLUSTER NODES.
async function replicasSeenBy(port) {
  return (await clusterNodes(port)).map((l) => l.split(' '))
    .filter((f) => f[2].includes('slave'))
    .map((f) => ({ port: Number(f[1].split(':')[1].split('@')[0]), id: f[0], masterId: f[3] }));
}

// Six nodes by `redis-cli --cluster create --cluster-replicas 1`, every node agreeing,
// every replica's link up and every node knowing each replica's master.
async function startCluster(kind) {
  const ports = await freePorts(NODES, true);
  const server = new Server(kind, 'per-shard', NODES, ports);
  for (const port of ports) spawnClusterNode(server, kind, port, RUVIO_LAYOUT);
  try {
    await server.waitReady();
    await redisCli(['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1',
      '--cluster-yes']);
    await eventually(() => settled(ports, MASTERS), 30_000, 'six nodes agreeing, epochs settled');
    await eventually(async () => {
      const replicas = await replicasSeenBy(ports[0]);
      if (replicas.length !== NODES - MASTERS) return false;
      for (const r of replicas) {
        if ((await infoField(r.port, 'replication', 'master_link_status')) !== 'up') return false;
        for (const port of ports) {
          const line = (await clusterNodes(port)).find((l) => l.startsWith(r.id));
          if (!line || line.split(' ')[3] !== r.masterId) return false;
        }
      }
      return true;
    }, 30_000, "every replica's link up, known by every node");
  } catch (e) {
    await server.stop();
    throw e;
  }
  return server;
}

for (const kind of ['ruvio', 'redis']) {
  describe(`ioredis Cluster through a reshard and a failover on ${kind} nodes${kind === 'ruvio'
    ? ' (forward mode, 2 shards each)' : ''}`, () => {
    let server;
    let cluster;
    let writers;

    before(async () => {
      server = await startCluster(kind);
    });
    // Also after a failure or a timeout of the test, which leaves the writers running.
    after(async () => {
      const stopping = writers && writers.stop();
      if (cluster) cluster.disconnect();
      await stopping;
      if (server) await server.stop();
    });

    // The debug build's reshard of 1000 slots between forward-mode nodes took 65 s on
    // a loaded 2-CPU machine (12 server threads and the client on it), where six
    // redis-servers took 1.6 s: the reshard moves RESHARD_SLOTS, and the whole file
    // stays under the runner's 180 s.
    it('follows ASK and MOVED of a reshard, then the replica elected for a killed master', { timeout: 150_000 },
      async (t) => {
        const ports = server.ports;
        const ids = await Promise.all(ports.map(myId));
        const portOf = (id) => ports[ids.indexOf(id)];
        // The killed master is the reshard's target; its replica must hold the
        // moved keys too.
        const [{ port: replica, masterId: targetId }, { masterId: sourceId }] = await replicasSeenBy(ports[0]);
        const [target, source] = [portOf(targetId), portOf(sourceId)];
        cluster = new Cluster(server.nodes, {
          redisOptions: { maxRetriesPerRequest: 2, connectTimeout: 1000 },
          retryDelayOnFailover: 100,
          retryDelayOnClusterDown: 100,
          slotsRefreshTimeout: 1000,
        });
        writers = startWriters(cluster, spreadKeys(KEYS), WRITERS);
        let targetRanges;
        try {
          await eventually(() => writers.total() >= 1000, 20_000, 'writes before the reshard');

          // a. The reshard: the source's first slots, with their keys, to the target.
          const sourceBefore = await ownRanges(source);
          const reshardAt = Date.now();
          await redisCli(['--cluster', 'reshard', `127.0.0.1:${source}`, '--cluster-from', sourceId,
            '--cluster-to', targetId, '--cluster-slots', String(RESHARD_SLOTS), '--cluster-yes']);
          t.diagnostic(`reshard of ${RESHARD_SLOTS} slots took ${Date.now() - reshardAt} ms`);
          const sourceAfter = await ownRanges(source);
          targetRanges = await ownRanges(target);
          const moved = writers.state.filter((s) => within(sourceBefore, s.slot) && !within(sourceAfter, s.slot));
          assert.ok(moved.length >= 3, `${moved.length} keys in the resharded slots`);
          for (const s of moved) assert.equal(await ownerOf(source, s.slot), `127.0.0.1:${target}`, s.key);
          writers.mark();
          await eventually(() => moved.every((s) => s.ackedSinceMark > 0), 20_000,
            'INCRs of every moved key on its new node');

          // b. The failover: the target killed once its replica has every INCR it
          // acknowledged (see the top of the file).
          const inTarget = (slot) => within(targetRanges, slot);
          await writers.hold(inTarget);
          const masterOffset = await infoField(target, 'replication', 'master_repl_offset');
          await eventually(async () => Number(await infoField(replica, 'replication', 'slave_repl_offset'))
            >= Number(masterOffset), 10_000, 'the replica caught up');
          await killHard(server.procs[ports.indexOf(target)]);
          const killedAt = Date.now();
          writers.release();
          await eventually(async () => JSON.stringify(await ownRanges(replica)) === JSON.stringify(targetRanges),
            20_000, 'the replica elected with the killed master\'s slots');
          t.diagnostic(`replica elected ${Date.now() - killedAt} ms after the kill`);
          writers.mark();
          await eventually(() => writers.state.every((s) => s.ackedSinceMark > 0), 30_000,
            'INCRs of every key after the failover');
          assert.ok(writers.state.filter((s) => inTarget(s.slot)).length >= 60);
        } finally {
          await writers.stop();
        }
        t.diagnostic(`${writers.total()} INCRs acknowledged; failures: ${JSON.stringify([...writers.errors])}`);

        // Every counter: at least what was acknowledged, at most that plus the failures.
        for (const s of writers.state) {
          const value = Number(await cluster.get(s.key));
          assert.ok(value >= s.acked && value <= s.acked + s.failed,
            `${s.key} (slot ${s.slot}): ${value}, ${s.acked} acknowledged, ${s.failed} failed`);
        }
      });
  });
}
