// ioredis as a restricted ACL user (username/password options) against forward
// mode with 2 shards, and against redis-server: allowed and refused commands on
// keys of both shards, a refused command in a pipeline and in multi(), a
// script's refused call, Pub/Sub on an allowed channel, and DELUSER closing the
// connection (docs/acl.md).
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const { Redis } = require('ioredis');

const { targets, keyOnShard, eventually } = require('./lib/servers');

const SHARDS = 2;

for (const target of targets('forward', SHARDS)) {
  describe(`ioredis as a restricted user on ${target.name}`, () => {
    let server;
    const clients = [];
    const client = (options = {}) => {
      const r = new Redis({
        host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1, enableReadyCheck: false, ...options,
      });
      clients.push(r);
      return r;
    };
    const a = keyOnShard('app:a', 0, SHARDS);
    const b = keyOnShard('app:b', 1, SHARDS);

    before(async () => {
      server = await target.start();
      const admin = client();
      const rules = ['on', '>apppw', '~app:*', '&news.*', '+@read', '+@write', '-@dangerous', '+@transaction',
        '+@scripting', '+publish', '+subscribe', '+ping'];
      assert.equal(await admin.call('ACL', 'SETUSER', 'app', ...rules), 'OK');
    });
    after(async () => {
      for (const r of clients.splice(0)) r.disconnect();
      await server.stop();
    });

    it('runs what the rules allow and gets -NOPERM for the rest', async () => {
      const app = client({ username: 'app', password: 'apppw' });
      assert.equal(await app.set(a, 1), 'OK');
      assert.equal(await app.set(b, 2), 'OK');
      assert.deepEqual(await app.mget(a, b), ['1', '2']);
      await assert.rejects(app.get('other'), {
        message: 'NOPERM this user has no permissions to access one of the keys used as arguments',
      });
      await assert.rejects(app.flushall(), {
        message: "NOPERM this user has no permissions to run the 'flushall' command",
      });
      await assert.rejects(app.publish('private', 'x'), {
        message: 'NOPERM this user has no permissions to access one of the channels used as arguments',
      });
      const piped = await app.pipeline().get(a).get('other').get(b).exec();
      assert.equal(piped[0][1], '1');
      assert.match(piped[1][0].message, /^NOPERM /);
      assert.equal(piped[2][1], '2');
      await assert.rejects(app.multi().incr(a).keys('*').exec(), {
        message: 'EXECABORT Transaction discarded because of previous errors.',
      });
      assert.equal(await app.get(a), '1');
      await assert.rejects(app.eval("return redis.call('get', 'other')", 0), (err) => {
        assert.match(err.message, /^ERR The user executing the script can't access at least one of the keys/);
        return true;
      });
      assert.equal(await app.eval("return redis.call('get', KEYS[1])", 1, b), '2');
    });

    it('subscribes to an allowed channel; DELUSER closes its connections', async () => {
      const sub = client({ username: 'app', password: 'apppw' });
      const app = client({ username: 'app', password: 'apppw', retryStrategy: () => null });
      const messages = [];
      sub.on('message', (channel, message) => messages.push([channel, message]));
      assert.equal(await sub.subscribe('news.today'), 1);
      assert.equal(await app.publish('news.today', 'hello'), 1);
      await eventually(() => messages.length === 1, 5000, 'the message');
      assert.deepEqual(messages[0], ['news.today', 'hello']);
      let closed = false;
      app.on('end', () => {
        closed = true;
      });
      const admin = client();
      assert.equal(await admin.call('ACL', 'DELUSER', 'app'), 1);
      await eventually(() => closed, 5000, 'the deleted user\'s connection to close');
      const list = await admin.call('CLIENT', 'LIST');
      assert.ok(!list.includes('user=app '), list);
    });
  });
}
