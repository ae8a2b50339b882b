// ioredis, the plain client against forward mode with 2 shards (keys of both shards in
// one MULTI, one script and one pipeline), and `Cluster` against per-shard mode with 2
// shards; each against redis-server (standalone, or a Redis Cluster of 2 masters) too.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const { Redis, Cluster } = require('ioredis');

const { targets, keyOnShard, keySlot, shardOfKey, eventually } = require('./lib/servers');

const SHARDS = 2;

// A transfer between two keys; answers the two balances, or an error reply.
const TRANSFER = `
local amount = tonumber(ARGV[1])
local from = tonumber(redis.call('GET', KEYS[1]) or '0')
if from < amount then return redis.error_reply('INSUFFICIENT funds') end
redis.call('DECRBY', KEYS[1], amount)
redis.call('INCRBY', KEYS[2], amount)
return {redis.call('GET', KEYS[1]), tonumber(redis.call('GET', KEYS[2])), redis.status_reply('DONE')}
`;

// Every open client, closed at the end of its suite.
function tracker() {
  const clients = [];
  return {
    add(client) {
      clients.push(client);
      return client;
    },
    closeAll() {
      for (const client of clients.splice(0)) client.disconnect();
    },
  };
}

for (const target of targets('forward', SHARDS)) {
  describe(`ioredis Redis on ${target.name}`, () => {
    let server;
    const open = tracker();
    const client = () => open.add(new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 }));
    // Keys of shard 0 and shard 1 (one server for redis-server).
    const a = keyOnShard('io-a', 0, SHARDS);
    const b = keyOnShard('io-b', 1, SHARDS);

    before(async () => {
      server = await target.start();
    });
    after(async () => {
      open.closeAll();
      await server.stop();
    });

    it('multi() over keys of both shards: replies per command, EXECABORT', async () => {
      const r = client();
      const results = await r.multi().set(a, 1).incrby(b, 5).get(a).mget(a, b).lpush(a, 'x').exec();
      assert.deepEqual(results.slice(0, 4), [[null, 'OK'], [null, 5], [null, '1'], [null, ['1', '5']]]);
      assert.match(results[4][0].message, /^WRONGTYPE Operation against a key holding the wrong kind of value$/);
      await assert.rejects(r.multi().set(a, 2).call('NOSUCHCMD').exec(), (err) => {
        assert.equal(err.message, 'EXECABORT Transaction discarded because of previous errors.');
        assert.match(err.previousErrors[0].message, /^ERR unknown command 'NOSUCHCMD'/);
        return true;
      });
      assert.equal(await r.get(a), '1');
    });

    it('WATCH retry loops under concurrent increments lose nothing', async () => {
      const counter = keyOnShard('io-counter', 1, SHARDS);
      const other = keyOnShard('io-other', 0, SHARDS);
      const workers = 4;
      const perWorker = 50;
      let retries = 0;
      const work = async () => {
        const r = client();
        for (let done = 0; done < perWorker;) {
          await r.watch(counter);
          const n = Number((await r.get(counter)) || 0);
          const result = await r.multi().set(counter, n + 1).incr(other).exec();
          if (result === null) retries++;
          else done++;
        }
      };
      await Promise.all(Array.from({ length: workers }, work));
      const r = client();
      assert.equal(Number(await r.get(counter)), workers * perWorker);
      assert.equal(Number(await r.get(other)), workers * perWorker);
      // Interleaved on one event loop, the workers do collide.
      assert.ok(retries > 0, 'no WATCH conflict happened');
    });

    it('defineCommand: EVALSHA falls back to EVAL, keys of both shards, error replies', async () => {
      const r = client();
      r.defineCommand('transfer', { numberOfKeys: 2, lua: TRANSFER });
      await r.set(a, 100);
      await r.del(b);
      assert.deepEqual(await r.transfer(a, b, 30), ['70', 30, 'DONE']);
      assert.deepEqual(await r.transfer(a, b, 30), ['40', 60, 'DONE']);
      await assert.rejects(r.transfer(a, b, 1000), { message: 'INSUFFICIENT funds' });
      assert.equal(await r.script('FLUSH'), 'OK');
      assert.deepEqual(await r.transfer(a, b, 40), ['0', 100, 'DONE']);
      // A pipeline of the script (ioredis loads it with SCRIPT LOAD first).
      await r.set(a, 10);
      const piped = await r.pipeline().transfer(a, b, 1).transfer(a, b, 2).get(b).exec();
      assert.deepEqual(piped, [[null, ['9', 101, 'DONE']], [null, ['7', 103, 'DONE']], [null, '103']]);
    });

    it('Pub/Sub: subscribe and psubscribe, message and pmessage, counts', async () => {
      const sub = client();
      const pub = client();
      const messages = [];
      sub.on('message', (channel, message) => messages.push(['message', channel, message]));
      sub.on('pmessage', (pattern, channel, message) => messages.push(['pmessage', pattern, channel, message]));
      assert.equal(await sub.subscribe('news.tech', 'weather'), 2);
      assert.equal(await sub.psubscribe('news.*'), 3);
      assert.equal(await pub.publish('news.tech', 'rust'), 2);
      assert.equal(await pub.publish('news.art', 'lua'), 1);
      assert.equal(await pub.publish('weather', 'rain'), 1);
      assert.equal(await pub.publish('nobody', 'x'), 0);
      await eventually(() => messages.length === 4, 5000, 'four messages');
      assert.deepEqual(messages, [
        ['message', 'news.tech', 'rust'],
        ['pmessage', 'news.*', 'news.tech', 'rust'],
        ['pmessage', 'news.*', 'news.art', 'lua'],
        ['message', 'weather', 'rain'],
      ]);
      assert.deepEqual(await pub.pubsub('NUMSUB', 'news.tech', 'weather'), ['news.tech', 1, 'weather', 1]);
      assert.equal(await pub.pubsub('NUMPAT'), 1);
      assert.equal(await sub.punsubscribe('news.*'), 2);
      await sub.unsubscribe();
      assert.equal(await pub.publish('news.tech', 'gone'), 0);
    });

    it('pipelines over both shards keep the order of replies, errors in place', async () => {
      const r = client();
      const keys = Array.from({ length: 100 }, (_, i) => `io-pipe-${i}`);
      assert.ok(new Set(keys.map((k) => shardOfKey(k, SHARDS))).size === SHARDS);
      const writes = r.pipeline();
      keys.forEach((k, i) => writes.set(k, i));
      assert.deepEqual(await writes.exec(), keys.map(() => [null, 'OK']));
      const reads = r.pipeline();
      keys.forEach((k) => reads.incr(k));
      reads.hset(keys[0], 'f', 'v');
      reads.mget(keys[1], keys[2], 'io-pipe-missing');
      const results = await reads.exec();
      assert.deepEqual(results.slice(0, 100), keys.map((_, i) => [null, i + 1]));
      assert.match(results[100][0].message, /^WRONGTYPE/);
      assert.deepEqual(results[101], [null, ['2', '3', null]]);
    });
  });
}

for (const target of targets('cluster', SHARDS)) {
  describe(`ioredis Cluster on ${target.name}`, () => {
    let server;
    const open = tracker();
    const cluster = () => open.add(new Cluster(server.nodes, { redisOptions: { maxRetriesPerRequest: 3 } }));

    before(async () => {
      server = await target.start();
    });
    after(async () => {
      open.closeAll();
      await server.stop();
    });

    it('keys on both shards, hash-tagged multi-key commands and transactions, CROSSSLOT', async () => {
      const c = cluster();
      const keys = Array.from({ length: 50 }, (_, i) => `cl-key-${i}`);
      assert.ok(new Set(keys.map((k) => shardOfKey(k, SHARDS))).size === SHARDS);
      for (const [i, k] of keys.entries()) assert.equal(await c.set(k, i), 'OK');
      for (const [i, k] of keys.entries()) assert.equal(await c.get(k), String(i));
      for (const tag of ['{user0}', '{user1}', '{user2}']) {
        assert.equal(await c.mset(`${tag}a`, '1', `${tag}b`, '2'), 'OK');
        assert.deepEqual(await c.mget(`${tag}a`, `${tag}b`), ['1', '2']);
        const results = await c.multi().incr(`${tag}a`).rpush(`${tag}l`, 'x', 'y').lrange(`${tag}l`, 0, -1).exec();
        assert.deepEqual(results, [[null, 2], [null, 2], [null, ['x', 'y']]]);
      }
      assert.ok(new Set(['{user0}', '{user1}', '{user2}'].map((t) => shardOfKey(t, SHARDS))).size === SHARDS);
      const [x, y] = [keyOnShard('cl-x', 0, SHARDS), keyOnShard('cl-y', 1, SHARDS)];
      await assert.rejects(c.mget(x, y), { message: "CROSSSLOT Keys in request don't hash to the same slot" });
      // A pipeline of one slot goes to its node as one batch.
      const pipe = c.pipeline();
      for (let i = 0; i < 20; i++) pipe.hset('{user1}h', `f${i}`, i);
      pipe.hlen('{user1}h');
      assert.deepEqual((await pipe.exec()).at(-1), [null, 20]);
    });

    it('defineCommand with hash-tagged keys runs on the owning node', async () => {
      const c = cluster();
      c.defineCommand('transfer', { numberOfKeys: 2, lua: TRANSFER });
      for (const tag of ['{acct0}', '{acct1}', '{acct3}']) {
        await c.set(`${tag}from`, 10);
        assert.deepEqual(await c.transfer(`${tag}from`, `${tag}to`, 4), ['6', 4, 'DONE']);
        await assert.rejects(c.transfer(`${tag}from`, `${tag}to`, 40), { message: 'INSUFFICIENT funds' });
      }
      assert.ok(new Set(['{acct0}', '{acct1}', '{acct3}'].map((t) => shardOfKey(t, SHARDS))).size === SHARDS);
      // Keys of two slots: the owner of the first answers CROSSSLOT.
      const [x, y] = [keyOnShard('cl-x', 0, SHARDS), keyOnShard('cl-y', 1, SHARDS)];
      await assert.rejects(c.transfer(x, y, 1), { message: /^CROSSSLOT Keys in request don't hash to the same slot/ });
    });

    it('a stale slot map is corrected by MOVED', async () => {
      const c = cluster();
      await c.set('cl-moved', 'here');
      const slot = keySlot('cl-moved');
      const owner = c.slots[slot][0];
      const wrong = c.nodes('master').map((n) => `${n.options.host}:${n.options.port}`).find((k) => k !== owner);
      assert.ok(wrong, 'a second node');
      // The wrong node itself answers MOVED with the owner's address...
      const node = c.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === wrong);
      await assert.rejects(node.get('cl-moved'), { message: `MOVED ${slot} ${owner}` });
      // ...which the cluster client follows, and learns.
      c.slots[slot] = [wrong];
      assert.equal(await c.get('cl-moved'), 'here');
      assert.deepEqual(c.slots[slot], [owner]);
    });

    it('Pub/Sub through the cluster client: subscribe, psubscribe, publish on any node', async () => {
      const sub = cluster();
      const pub = cluster();
      const got = [];
      sub.on('message', (channel, message) => got.push([channel, message]));
      sub.on('pmessage', (pattern, channel, message) => got.push([pattern, channel, message]));
      await sub.subscribe('orders');
      await sub.psubscribe('order*');
      // PUBLISH reaches subscribers of every node whichever node it is sent to.
      for (const node of pub.nodes('master')) await node.publish('orders', `via ${node.options.port}`);
      await eventually(() => got.length === 2 * SHARDS, 5000, 'every message');
      for (const node of pub.nodes('master')) {
        assert.ok(got.some((m) => m.length === 2 && m[1] === `via ${node.options.port}`));
        assert.ok(got.some((m) => m.length === 3 && m[0] === 'order*' && m[2] === `via ${node.options.port}`));
      }
    });
  });
}
