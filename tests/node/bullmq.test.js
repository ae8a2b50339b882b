// BullMQ, a job queue built on Lua scripts, lists, sorted sets, hashes, streams and
// blocking commands: against Ruvio in forward mode with 2 shards, with BullMQ's
// default prefix (a queue's keys on both shards, and its scripts building job keys
// of either shard inside Lua: keys they did not declare, which one Redis allows and
// Ruvio borrows under its script lock, docs/scripting.md) and with BullMQ's
// documented cluster prefix (a hash tag: every key of a queue on one shard; two
// tags, one per shard), with 1 shard, in per-shard mode through an ioredis Cluster
// connection, and against redis-server and a Redis Cluster in the same run.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const { Queue, Worker, QueueEvents, FlowProducer } = require('bullmq');
const { Cluster } = require('ioredis');

const { startRuvio, startRedis, startRedisCluster, eventually, shardOfKey } = require('./lib/servers');

// Hash-tag prefixes whose queues live on shard 1 and shard 0 of 2: the tests of one
// suite alternate between them, so both shards serve queues.
const TAGGED = ['{bull}', '{bullmq}'];
// `prefixes`: the tests' prefixes in turn (undefined: BullMQ's default, `bull`).
// `cluster`: BullMQ gets an ioredis Cluster connection (per-shard mode, Redis Cluster).
const TARGETS = [
  { name: 'ruvio forward 2 shards, default prefix', start: () => startRuvio('forward', 2), prefixes: [undefined] },
  { name: 'ruvio forward 2 shards, prefixes {bull} {bullmq}', start: () => startRuvio('forward', 2), prefixes: TAGGED },
  { name: 'ruvio forward 1 shard, default prefix', start: () => startRuvio('forward', 1), prefixes: [undefined] },
  { name: 'redis-server, default prefix', start: startRedis, prefixes: [undefined] },
  { name: 'ruvio per-shard 2 shards as a Cluster, prefixes {bull} {bullmq}', start: () => startRuvio('per-shard', 2),
    prefixes: TAGGED, cluster: true },
  { name: 'redis cluster 2 masters, prefixes {bull} {bullmq}', start: () => startRedisCluster(2),
    prefixes: TAGGED, cluster: true },
];

// `BULLMQ_TARGETS` (a substring of a target's name) runs those targets only: the
// soak script (scripts/bullmq_soak.sh) repeats one subtest on one target.
const only = process.env.BULLMQ_TARGETS;
for (const target of TARGETS.filter((t) => !only || t.name.includes(only))) {
  describe(`BullMQ on ${target.name}`, () => {
    let server;
    const closers = [];
    let queueNumber = 0;

    // A fresh queue name per test, its Queue, QueueEvents (reading the queue's events
    // from the start) and a Worker running `processor`, all closed after the suite.
    async function queueWithWorker(processor, workerOptions = {}) {
      const name = `q${++queueNumber}`;
      let connection = { host: '127.0.0.1', port: server.port };
      if (target.cluster) {
        // One shared Cluster client; BullMQ duplicates it for its blocking calls.
        connection = new Cluster(server.nodes, { redisOptions: { maxRetriesPerRequest: null } });
        closers.push(() => connection.disconnect());
      }
      const options = { connection, prefix: target.prefixes[queueNumber % target.prefixes.length] };
      const queue = new Queue(name, options);
      const events = new QueueEvents(name, { ...options, lastEventId: '0-0' });
      closers.push(() => queue.close(), () => events.close());
      await queue.waitUntilReady();
      await events.waitUntilReady();
      const worker = processor && new Worker(name, processor, { ...options, ...workerOptions });
      if (worker) {
        closers.push(() => worker.close());
        await worker.waitUntilReady();
      }
      return { queue, events, worker };
    }

    before(async () => {
      assert.deepEqual(TAGGED.map((tag) => shardOfKey(tag, 2)), [1, 0]);
      server = await target.start();
    });
    after(async () => {
      for (const close of closers.reverse()) await close();
      await server.stop();
    });

    it('a worker processes every job once; getJobCounts', async () => {
      const seen = new Map();
      const { queue, worker } = await queueWithWorker(async (job) => {
        seen.set(job.id, (seen.get(job.id) || 0) + 1);
        return { double: job.data.n * 2 };
      }, { concurrency: 4 });
      const completed = [];
      worker.on('completed', (job, result) => completed.push([job.data.n, result.double]));
      await queue.addBulk(Array.from({ length: 20 }, (_, n) => ({ name: 'bulk', data: { n } })));
      for (let n = 20; n < 25; n++) await queue.add('single', { n });
      await eventually(() => completed.length === 25, 15_000, '25 completed jobs');
      assert.deepEqual(completed.map(([n]) => n).sort((x, y) => x - y), Array.from({ length: 25 }, (_, n) => n));
      assert.ok(completed.every(([n, double]) => double === n * 2));
      assert.ok([...seen.values()].every((times) => times === 1));
      const counts = await queue.getJobCounts('waiting', 'active', 'completed', 'failed', 'delayed');
      assert.deepEqual(counts, { waiting: 0, active: 0, completed: 25, failed: 0, delayed: 0 });
      const job = (await queue.getCompleted(0, 0))[0];
      assert.deepEqual(job.returnvalue, { double: job.data.n * 2 });
      assert.equal(await job.getState(), 'completed');
    });

    it('a delayed job waits its delay, then runs', async () => {
      const { queue, events } = await queueWithWorker(async () => 'late');
      const job = await queue.add('later', { x: 1 }, { delay: 400 });
      assert.equal(await job.getState(), 'delayed');
      assert.equal((await queue.getJobCounts('delayed')).delayed, 1);
      assert.equal(await job.waitUntilFinished(events, 10_000), 'late');
      const done = await queue.getJob(job.id);
      assert.ok(done.processedOn - done.timestamp >= 400, `ran after ${done.processedOn - done.timestamp} ms`);
      assert.equal((await queue.getJobCounts('delayed')).delayed, 0);
    });

    it('retries with exponential backoff, then fails', async () => {
      const attempts = [];
      const { queue, events } = await queueWithWorker(async (job) => {
        attempts.push(Date.now());
        throw new Error(`boom ${job.attemptsMade}`);
      });
      const failed = [];
      events.on('failed', ({ jobId, failedReason }) => failed.push([jobId, failedReason]));
      const job = await queue.add('flaky', {}, { attempts: 3, backoff: { type: 'exponential', delay: 150 } });
      await assert.rejects(job.waitUntilFinished(events, 10_000), { message: 'boom 2' });
      assert.equal(attempts.length, 3);
      // 150 ms before the second attempt, 300 ms before the third.
      assert.ok(attempts[1] - attempts[0] >= 150, `first backoff ${attempts[1] - attempts[0]} ms`);
      assert.ok(attempts[2] - attempts[1] >= 300, `second backoff ${attempts[2] - attempts[1]} ms`);
      const final = await queue.getJob(job.id);
      assert.equal(final.attemptsMade, 3);
      assert.equal(final.failedReason, 'boom 2');
      assert.equal(await final.getState(), 'failed');
      assert.deepEqual(failed, [[job.id, 'boom 2']]);
      const counts = await queue.getJobCounts('failed', 'delayed', 'waiting');
      assert.deepEqual(counts, { failed: 1, delayed: 0, waiting: 0 });
    });

    it('a repeatable job (job scheduler, every N ms) runs again and again, until removed', async () => {
      const runs = [];
      const { queue } = await queueWithWorker(async (job) => {
        runs.push({ at: Date.now(), name: job.name, data: job.data });
      });
      await queue.upsertJobScheduler('ticker', { every: 250 }, { name: 'tick', data: { k: 'v' } });
      assert.equal((await queue.getJobSchedulers()).length, 1);
      await eventually(() => runs.length >= 3, 10_000, 'three runs');
      assert.ok(runs.every((run) => run.name === 'tick' && run.data.k === 'v'));
      assert.ok(runs[2].at - runs[0].at >= 300, `three runs in ${runs[2].at - runs[0].at} ms`);
      assert.equal(await queue.removeJobScheduler('ticker'), true);
      assert.deepEqual(await queue.getJobSchedulers(), []);
      const settled = runs.length;
      await new Promise((resolve) => setTimeout(resolve, 600));
      assert.ok(runs.length <= settled + 1, 'the scheduler stopped');
    });

    it('job events on the worker and on QueueEvents: active, progress, completed, failed', async () => {
      const { queue, events, worker } = await queueWithWorker(async (job) => {
        await job.updateProgress(40);
        await job.updateProgress({ step: 'two' });
        if (job.data.fail) throw new Error('nope');
        return 'fine';
      });
      const seen = { worker: [], events: [] };
      worker.on('active', (job) => seen.worker.push(['active', job.id]));
      worker.on('progress', (job, progress) => seen.worker.push(['progress', job.id, progress]));
      worker.on('completed', (job, result) => seen.worker.push(['completed', job.id, result]));
      worker.on('failed', (job, err) => seen.worker.push(['failed', job.id, err.message]));
      for (const kind of ['added', 'active', 'progress', 'completed', 'failed']) {
        events.on(kind, (args) => seen.events.push([kind, args]));
      }
      const good = await queue.add('good', {});
      const bad = await queue.add('bad', { fail: true });
      assert.equal(await good.waitUntilFinished(events, 10_000), 'fine');
      await assert.rejects(bad.waitUntilFinished(events, 10_000), { message: 'nope' });
      await eventually(() => seen.worker.length === 8, 5000, 'eight worker events');
      // waitUntilFinished may settle from its first look at the job (already finished)
      // before QueueEvents has read the job's last event from the stream: wait for both.
      const finalEvent = (kind, id) => seen.events.some(([k, args]) => k === kind && args.jobId === id);
      await eventually(() => finalEvent('completed', good.id) && finalEvent('failed', bad.id), 5000, 'the final events');
      assert.deepEqual(seen.worker, [
        ['active', good.id], ['progress', good.id, 40], ['progress', good.id, { step: 'two' }],
        ['completed', good.id, 'fine'],
        ['active', bad.id], ['progress', bad.id, 40], ['progress', bad.id, { step: 'two' }],
        ['failed', bad.id, 'nope'],
      ]);
      const ofJob = (id) => seen.events.filter(([, args]) => args.jobId === id).map(([kind, args]) => {
        const { jobId, prev, name, ...rest } = args;
        return [kind, rest];
      });
      assert.deepEqual(ofJob(good.id), [
        ['added', {}], ['active', {}], ['progress', { data: 40 }], ['progress', { data: { step: 'two' } }],
        ['completed', { returnvalue: 'fine' }],
      ]);
      assert.deepEqual(ofJob(bad.id), [
        ['added', {}], ['active', {}], ['progress', { data: 40 }], ['progress', { data: { step: 'two' } }],
        ['failed', { failedReason: 'nope' }],
      ]);
    });

    it('priorities: unprioritized first, then by priority; pause and resume', async () => {
      const order = [];
      const { queue, worker } = await queueWithWorker(async (job) => {
        order.push(job.name);
      }, { autorun: false });
      await queue.pause();
      assert.equal(await queue.isPaused(), true);
      await queue.add('p3', {}, { priority: 3 });
      await queue.add('none', {});
      await queue.add('p1', {}, { priority: 1 });
      await queue.add('p2', {}, { priority: 2 });
      // BullMQ 6 keeps a paused queue's jobs in its wait list (the pause is a flag).
      assert.deepEqual(await queue.getJobCounts('paused', 'prioritized', 'waiting'),
        { paused: 0, prioritized: 3, waiting: 1 });
      worker.run();
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual(order, [], 'a paused queue hands out no job');
      await queue.resume();
      await eventually(() => order.length === 4, 10_000, 'four jobs');
      assert.deepEqual(order, ['none', 'p1', 'p2', 'p3']);
    });

    it('a flow: the parent runs after its children, with their return values', async () => {
      // The worker starts once the parent's state is read: a fast worker would otherwise
      // finish the children (and take the parent) before that line runs.
      const { queue: flowQueue } = await queueWithWorker(null);
      const flows = new FlowProducer({ connection: flowQueue.opts.connection, prefix: flowQueue.opts.prefix });
      closers.push(() => flows.close());
      const tree = await flows.add({
        name: 'parent', queueName: flowQueue.name, data: {},
        children: [1, 2, 3].map((n) => ({ name: 'child', queueName: flowQueue.name, data: { n } })),
      });
      assert.equal(await tree.job.getState(), 'waiting-children');
      const ran = [];
      const worker = new Worker(flowQueue.name, async (job) => {
        ran.push(job.name);
        if (job.name === 'child') return job.data.n * 10;
        const values = Object.values(await job.getChildrenValues());
        return values.reduce((a, b) => a + b, 0);
      }, { connection: flowQueue.opts.connection, prefix: flowQueue.opts.prefix });
      closers.push(() => worker.close());
      await eventually(async () => (await tree.job.getState()) === 'completed', 10_000, 'the parent');
      assert.deepEqual(ran, ['child', 'child', 'child', 'parent']);
      assert.equal((await flowQueue.getJob(tree.job.id)).returnvalue, 60);
      assert.deepEqual(await tree.job.getDependenciesCount(), { failed: 0, ignored: 0, processed: 3, unprocessed: 0 });
    });

    it('job logs, data updates, removal, deduplication, getWorkers, clean and obliterate', async () => {
      const { queue, worker } = await queueWithWorker(async (job) => {
        await job.log(`started ${job.data.n}`);
        await job.updateData({ ...job.data, seen: true });
        return job.data.n;
      });
      const job = await queue.add('logged', { n: 7 });
      await eventually(async () => (await job.getState()) === 'completed', 10_000, 'the job');
      assert.deepEqual(await queue.getJobLogs(job.id), { logs: ['started 7'], count: 1 });
      assert.deepEqual((await queue.getJob(job.id)).data, { n: 7, seen: true });
      const workers = await queue.getWorkers();
      assert.equal(workers.length, 1, JSON.stringify(workers));
      await worker.pause();
      const first = await queue.add('once', {}, { deduplication: { id: 'same' } });
      const second = await queue.add('once', {}, { deduplication: { id: 'same' } });
      assert.equal(second.id, first.id);
      assert.equal(await queue.getDeduplicationJobId('same'), first.id);
      const gone = await queue.add('doomed', {});
      await gone.remove();
      assert.equal(await queue.getJob(gone.id), undefined);
      assert.deepEqual(await queue.clean(0, 100, 'completed'), [job.id]);
      assert.equal((await queue.getJobCounts('completed')).completed, 0);
      await queue.obliterate({ force: true });
      assert.deepEqual(await queue.getJobCounts('waiting', 'completed', 'failed'), { waiting: 0, completed: 0, failed: 0 });
    });

    it('a rate-limited worker takes at least the limit\'s duration per batch', async () => {
      const done = [];
      const { queue } = await queueWithWorker(async () => {
        done.push(Date.now());
      }, { limiter: { max: 2, duration: 300 } });
      await queue.addBulk(Array.from({ length: 6 }, (_, n) => ({ name: 'limited', data: { n } })));
      await eventually(() => done.length === 6, 10_000, 'six jobs');
      assert.ok(done[5] - done[0] >= 550, `six jobs in ${done[5] - done[0]} ms`);
    });

    it('a stalled job (its worker gone, its lock expired) is taken up by another worker', async () => {
      let hang;
      const { queue, events, worker } = await queueWithWorker(() => new Promise((resolve) => {
        hang = resolve;
      }), { lockDuration: 400, stalledInterval: 200 });
      const stalled = [];
      events.on('stalled', ({ jobId }) => stalled.push(jobId));
      const job = await queue.add('stuck', {});
      await eventually(() => hang, 5000, 'the first worker to take the job');
      // The first worker stops renewing its lock and never finishes the job.
      await worker.close(true);
      const rescuer = new Worker(queue.name, async () => 'rescued', {
        connection: queue.opts.connection, prefix: queue.opts.prefix, stalledInterval: 200,
      });
      closers.push(() => rescuer.close());
      assert.equal(await job.waitUntilFinished(events, 15_000), 'rescued');
      assert.deepEqual(stalled, [job.id]);
      hang();
    });
  });
}
