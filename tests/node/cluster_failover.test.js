// ioredis `Cluster` keeps working through a reshard and a failover (issue 35): three
// masters and a replica of the first, each its own process with the cluster bus
// (`ruvio --cluster-enabled yes --shards 1`, or redis-server for the same body), while
// an ioredis Cluster client INCRs 200 counters spread over all slots without pause:
//   a. one slot moved by hand, paused while its key is on the new node but the slot
//      still migrating: ioredis follows -ASK (ASKING, then the INCR); then
//      `redis-cli --cluster reshard` moves 1000 slots from the second master to the
//      third, keys and all: ioredis follows the -MOVED redirections (and -ASK);
//   b. the first master is killed with SIGKILL: its replica is elected in its place,
//      and ioredis refreshes its slot map and keeps writing to those slots.
// At the end every counter holds at least its acknowledged INCRs and at most those
// plus the INCRs that failed (a failed one may have applied), and every counter took
// writes after the failover.
//
// Replication is asynchronous, in Redis as in Ruvio: an INCR the master acknowledged
// a moment before a `kill -9` may never reach its replica. So the writers hold back
// from the first master's keys just before the kill, until the replica has everything
// the master acknowledged, and go back to them as soon as it is dead: they write on
// through the whole failover, while the assertion value >= acknowledged stays one
// that Redis meets.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const { Cluster } = require('ioredis');

const { Server, freePorts, rawCommand, eventually } = require('./lib/servers');
const {
  spawnClusterNode, bulkText, clusterNodes, myId, infoField, ok, settled, ownerOf, redisCli, spreadKeys,
  startWriters, killHard,
} = require('./lib/cluster');

// Each node a Ruvio process of one shard (or a redis-server).
const RUVIO_LAYOUT = ['--shards', '1'];
const KEYS = 200;
const WRITERS = 16;
const MASTER_SLOTS = [[0, 5460], [5461, 10922], [10923, 16383]];
const RESHARD_SLOTS = 1000;
const FIRST_MASTER_LAST_SLOT = MASTER_SLOTS[0][1];
const inFirstMaster = (slot) => slot <= FIRST_MASTER_LAST_SLOT;

// Three masters, a third of the slots each, and a replica of the first, its link up
// and every node knowing it as the first's replica.
async function startCluster(kind) {
  const ports = await freePorts(4, true);
  const server = new Server(kind, 'per-shard', 4, ports);
  for (const port of ports) spawnClusterNode(server, kind, port, RUVIO_LAYOUT);
  try {
    await server.waitReady();
    const [first, , , replica] = ports;
    for (const [i, [lo, hi]] of MASTER_SLOTS.entries()) await ok(ports[i], ['CLUSTER', 'ADDSLOTSRANGE', lo, hi]);
    for (const port of ports.slice(1)) await ok(first, ['CLUSTER', 'MEET', '127.0.0.1', port]);
    await eventually(() => settled(ports, MASTER_SLOTS.length), 20_000, 'four nodes agreeing, epochs settled');
    const firstId = await myId(first);
    await ok(replica, ['CLUSTER', 'REPLICATE', firstId]);
    await eventually(async () => (await infoField(replica, 'replication', 'master_link_status')) === 'up',
      20_000, "the replica's link up");
    const replicaId = await myId(replica);
    await eventually(async () => {
      for (const port of ports) {
        const line = (await clusterNodes(port)).find((l) => l.startsWith(replicaId));
        if (!line || line.split(' ')[3] !== firstId) return false;
      }
      return true;
    }, 20_000, 'every node knowing the replica');
  } catch (e) {
    await server.stop();
    throw e;
  }
  return server;
}

// How many ASKING commands `port` ran (INFO commandstats).
async function askingCalls(port) {
  const stats = bulkText(await rawCommand(port, ['INFO', 'commandstats']));
  const found = stats.match(/^cmdstat_asking:calls=(\d+)/m);
  return found ? Number(found[1]) : 0;
}

for (const kind of ['ruvio', 'redis']) {
  describe(`ioredis Cluster through a reshard and a failover on ${kind} nodes`, () => {
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

    it('follows ASK and MOVED, then the replica elected for a killed master', { timeout: 60_000 }, async (t) => {
      const [first, second, third, replica] = server.ports;
      const [secondId, thirdId] = [await myId(second), await myId(third)];
      cluster = new Cluster(server.nodes.slice(0, 3), {
        redisOptions: { maxRetriesPerRequest: 2, connectTimeout: 1000 },
        retryDelayOnFailover: 100,
        retryDelayOnClusterDown: 100,
        slotsRefreshTimeout: 1000,
      });
      const keys = spreadKeys(KEYS);
      writers = startWriters(cluster, keys, WRITERS);
      try {
        await eventually(() => writers.total() >= 1000, 20_000, 'writes before the reshard');

        // a. One slot of the second master, moved step by step: while it is
        // migrating with its counter already on the third master, the second
        // answers -ASK, and the counter's INCRs land through ASKING.
        const asked = writers.state.find((s) => s.slot >= MASTER_SLOTS[1][0] + RESHARD_SLOTS
          && s.slot <= MASTER_SLOTS[1][1]);
        await ok(third, ['CLUSTER', 'SETSLOT', asked.slot, 'IMPORTING', secondId]);
        await ok(second, ['CLUSTER', 'SETSLOT', asked.slot, 'MIGRATING', thirdId]);
        await ok(second, ['MIGRATE', '127.0.0.1', third, '', 0, 5000, 'KEYS', asked.key]);
        writers.mark();
        await eventually(() => asked.ackedSinceMark >= 3, 10_000, 'INCRs through -ASK');
        // (The first may have been sent before the move, and answered by the second.)
        assert.ok(await askingCalls(third) >= 2, 'ASKING before the INCRs on the importing node');
        for (const port of [third, second, first]) await ok(port, ['CLUSTER', 'SETSLOT', asked.slot, 'NODE', thirdId]);
        // redis-cli refuses to reshard a cluster whose nodes disagree: the replica
        // learns the move from the bus.
        await eventually(async () => {
          for (const port of server.ports) if ((await ownerOf(port, asked.slot)) !== `127.0.0.1:${third}`) return false;
          return true;
        }, 10_000, 'every node knowing the moved slot');

        // Then `redis-cli --cluster reshard`: the second master's first 1000 slots,
        // with their keys, go to the third while the writers go on.
        const moved = writers.state.filter((s) => s.slot >= MASTER_SLOTS[1][0]
          && s.slot < MASTER_SLOTS[1][0] + RESHARD_SLOTS);
        assert.ok(moved.length >= 10, `${moved.length} keys in the resharded slots`);
        const reshardAt = Date.now();
        await redisCli(['--cluster', 'reshard', `127.0.0.1:${first}`, '--cluster-from', secondId,
          '--cluster-to', thirdId, '--cluster-slots', String(RESHARD_SLOTS), '--cluster-yes']);
        t.diagnostic(`reshard of ${RESHARD_SLOTS} slots took ${Date.now() - reshardAt} ms`);
        for (const s of moved) assert.equal(await ownerOf(first, s.slot), `127.0.0.1:${third}`, s.key);
        writers.mark();
        await eventually(() => moved.every((s) => s.ackedSinceMark > 0), 20_000,
          'INCRs of every moved key on its new node');

        // b. The failover: the first master killed once its replica has every INCR
        // it acknowledged (see the top of the file).
        await writers.hold(inFirstMaster);
        const masterOffset = await infoField(first, 'replication', 'master_repl_offset');
        await eventually(async () => Number(await infoField(replica, 'replication', 'slave_repl_offset'))
          >= Number(masterOffset), 10_000, 'the replica caught up');
        await killHard(server.procs[0]);
        const killedAt = Date.now();
        writers.release();
        const replicaId = await myId(replica);
        await eventually(async () => (await ownerOf(replica, 0)) === `127.0.0.1:${replica}`
          && (await clusterNodes(replica)).some((l) => l.startsWith(replicaId) && l.includes('master')),
        20_000, 'the replica elected');
        t.diagnostic(`replica elected ${Date.now() - killedAt} ms after the kill`);
        writers.mark();
        await eventually(() => writers.state.every((s) => s.ackedSinceMark > 0), 30_000,
          'INCRs of every key after the failover');
        const firstMasterKeys = writers.state.filter((s) => inFirstMaster(s.slot));
        assert.ok(firstMasterKeys.length >= 60 && firstMasterKeys.every((s) => s.ackedSinceMark > 0));
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
