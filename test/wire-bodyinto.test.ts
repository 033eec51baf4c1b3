// Ranged GETs read in place (src/wire/bodyinto.ts): against svcfs serve, and
// against a scripted HTTP server for what a real store does only sometimes
// (a chunked body, a kept-alive connection closed, a body cut short, an
// interim response, a head in pieces, a length that does not match).
import t from 'tap';
import { randomBytes } from 'node:crypto';
import * as net from 'node:net';
import { SvcClient } from '../src/wire/client';
import { ADMIN, startServer } from './helpers/server';

const MiB = 1024 * 1024;

t.test('svcfs serve: byte-exact ranges over a few kept-alive connections, and errors with their codes', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const data = randomBytes(9 * MiB + 123);
  await c.put('test', 'big', data);
  const etag = (await c.head('test', 'big') as { etag: string }).etag;
  for (let i = 0; i < 40; i++) {
    const start = (i * 229_717) % (data.length - MiB);
    const into = Buffer.alloc(MiB + i);
    await c.getRangeInto('test', 'big', start, start + into.length - 1, into, { ifMatch: etag });
    if (!into.equals(data.subarray(start, start + into.length))) t.fail(`range ${i} differs`);
  }
  t.same(c.directGets(), { opened: 1, sent: 40 }, 'one after another: one connection, kept alive');
  const bufs = Array.from({ length: 12 }, () => Buffer.alloc(768 * 1024));
  await Promise.all(bufs.map((b, i) => c.getRangeInto('test', 'big', i * b.length, (i + 1) * b.length - 1, b)));
  t.ok(Buffer.concat(bufs).equals(data.subarray(0, 12 * 768 * 1024)), '12 at once: byte-exact');
  t.ok(c.directGets()!.opened <= 12, `at most one connection each (${c.directGets()!.opened})`);
  const small = Buffer.alloc(10);
  await t.rejects(c.getRangeInto('test', 'big', 0, 9, small, { ifMatch: 'f'.repeat(32) }), { code: 'PreconditionFailed', status: 412 });
  await t.rejects(c.getRangeInto('test', 'none', 0, 9, small), { code: 'NoSuchKey', status: 404 });
  await c.getRangeInto('test', 'big', 5, 14, small);
  t.ok(small.equals(data.subarray(5, 15)), 'the connection still serves after the errors');
  t.equal(c.directGets()!.sent, 55, 'every GET took the direct path');
});

type Reply = (sock: net.Socket, range: [number, number]) => void;

/** A server that answers each GET with the next scripted reply (the last one repeats) over `data`. */
async function scripted(t: Tap, data: Buffer, replies: Reply[]): Promise<{ url: string; requests: number; connections: number }> {
  const st = { url: '', requests: 0, connections: 0 };
  const open = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    st.connections++;
    open.add(sock);
    sock.on('close', () => open.delete(sock));
    let buf = '';
    sock.on('error', () => undefined);
    sock.on('data', (d) => {
      buf += d.toString('latin1');
      for (let end = buf.indexOf('\r\n\r\n'); end >= 0; end = buf.indexOf('\r\n\r\n')) {
        const head = buf.slice(0, end);
        buf = buf.slice(end + 4);
        const m = /\r\nrange: bytes=(\d+)-(\d+)/i.exec(head)!;
        const reply = replies[Math.min(st.requests++, replies.length - 1)]!;
        reply(sock, [Number(m[1]), Number(m[2])]);
      }
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  t.teardown(() => new Promise<void>((ok) => { server.close(() => ok()); for (const sock of open) sock.destroy(); }));
  st.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return st;
}

interface Tap { teardown(fn: () => unknown): void }

const partial = (data: Buffer, [a, b]: [number, number], extra = '') =>
  Buffer.concat([Buffer.from(`HTTP/1.1 206 Partial Content\r\ncontent-range: bytes ${a}-${b}/${data.length}\r\ncontent-length: ${b - a + 1}\r\n${extra}\r\n`), data.subarray(a, b + 1)]);

t.test('scripted server: what a store does only sometimes', async (t) => {
  const data = randomBytes(256 * 1024);
  const client = (url: string) => {
    const c = new SvcClient({ endpoint: url, credentials: ADMIN, maxAttempts: 3, baseDelayMs: 1 });
    t.teardown(() => c.close());
    return c;
  };
  const get = async (c: SvcClient, a: number, b: number) => {
    const into = Buffer.alloc(b - a + 1);
    await c.getRangeInto('test', 'k', a, b, into);
    return into.equals(data.subarray(a, b + 1));
  };

  await t.test('a chunked body: that request and the next go through undici, byte-exact', async (t) => {
    const s = await scripted(t, data, [(sock, [a, b]) => {
      const body = data.subarray(a, b + 1);
      sock.write(`HTTP/1.1 206 Partial Content\r\ntransfer-encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n`);
      sock.write(body);
      sock.write('\r\n0\r\n\r\n');
    }]);
    const c = client(s.url);
    t.ok(await get(c, 100, 70_099));
    t.equal(c.directGets(), undefined, 'given up for this store');
    t.ok(await get(c, 0, 9));
    t.equal(c.retries, 0, 'no retry spent on it');
  });

  await t.test('the server closes a kept-alive connection after each answer: the next GET goes on a new one, without a retry', async (t) => {
    const s = await scripted(t, data, [(sock, r) => { sock.end(partial(data, r)); }]);
    const c = client(s.url);
    for (let i = 0; i < 5; i++) t.ok(await get(c, i * 1000, i * 1000 + 4999));
    t.equal(c.retries, 0);
    t.equal(s.connections, 5);
  });

  await t.test('a kept-alive connection dropped as a request arrives: sent again on a new one, without a retry', async (t) => {
    const s = await scripted(t, data, [(sock, r) => { sock.write(partial(data, r)); }, (sock) => { sock.destroy(); }, (sock, r) => { sock.write(partial(data, r)); }]);
    const c = client(s.url);
    t.ok(await get(c, 0, 999));
    t.ok(await get(c, 1000, 1999));
    t.equal(c.retries, 0);
    t.same([s.requests, s.connections], [3, 2]);
    // on a new connection the same is a failure of the request: retried as such
    const s2 = await scripted(t, data, [(sock) => { sock.destroy(); }, (sock, r) => { sock.write(partial(data, r)); }]);
    const c2 = client(s2.url);
    t.ok(await get(c2, 0, 999));
    t.equal(c2.retries, 1);
  });

  await t.test('connection: close is honoured (a new connection for the next)', async (t) => {
    const s = await scripted(t, data, [(sock, r) => { sock.write(partial(data, r, 'connection: close\r\n')); }]);
    const c = client(s.url);
    t.ok(await get(c, 0, 999));
    t.ok(await get(c, 1000, 1999));
    t.equal(c.directGets()!.opened, 2);
    t.equal(c.retries, 0);
  });

  await t.test('a body cut short: retried, byte-exact', async (t) => {
    const s = await scripted(t, data, [
      (sock, r) => { const full = partial(data, r); sock.write(full.subarray(0, full.length - 5000)); setTimeout(() => sock.destroy(), 20); },
      (sock, r) => { sock.write(partial(data, r)); },
    ]);
    const c = client(s.url);
    t.ok(await get(c, 0, 99_999));
    t.equal(c.retries, 1);
  });

  await t.test('an interim 100 Continue, a head in pieces, a body in small writes', async (t) => {
    const s = await scripted(t, data, [(sock, r) => {
      const full = partial(data, r);
      sock.write('HTTP/1.1 100 Continue\r\n\r\n');
      let at = 0;
      const step = () => {
        if (at >= full.length || sock.destroyed) return;
        sock.write(full.subarray(at, at + 7 + (at % 1000)));
        at += 7 + (at % 1000);
        setImmediate(step);
      };
      step();
    }]);
    const c = client(s.url);
    t.ok(await get(c, 3, 20_002));
    t.ok(await get(c, 20_003, 20_003), 'and one byte');
  });

  await t.test('a body of another length than the range: an error (retried), never bytes out of place', async (t) => {
    const s = await scripted(t, data, [(sock, [a, b]) => { sock.write(partial(data, [a, b + 10])); }]);
    const c = client(s.url);
    const into = Buffer.alloc(100);
    await t.rejects(c.getRangeInto('test', 'k', 0, 99, into), { code: 'ERANGE' });
    t.equal(c.retries, 2, 'every attempt spent');
    t.equal(s.requests, 3);
  });

  await t.test('an error with its XML body, then the same connection serves', async (t) => {
    const xml = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>later</Message></Error>';
    const s = await scripted(t, data, [
      (sock) => { sock.write(`HTTP/1.1 503 Slow Down\r\ncontent-type: application/xml\r\ncontent-length: ${xml.length}\r\n\r\n${xml}`); },
      (sock, r) => { sock.write(partial(data, r)); },
    ]);
    const c = client(s.url);
    t.ok(await get(c, 10, 1009));
    t.equal(c.retries, 1, 'SlowDown retried');
    t.equal(s.connections, 1, 'on the same connection');
  });

  await t.test('nothing comes back: a timeout, retried', async (t) => {
    const s = await scripted(t, data, [() => undefined, (sock, r) => { sock.write(partial(data, r)); }]);
    const c = new SvcClient({ endpoint: s.url, credentials: ADMIN, maxAttempts: 3, baseDelayMs: 1, headersTimeoutMs: 300 });
    t.teardown(() => c.close());
    t.ok(await get(c, 0, 99));
    t.equal(c.retries, 1);
  });
});
