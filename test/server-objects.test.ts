// Object operations over real HTTP against a started `svcfs serve`.
import t from 'tap';
import { createHash } from 'node:crypto';
import { parseXml } from '../src/wire/xml';
import { raw } from './helpers/http';
import { startServer } from './helpers/server';

const md5b64 = (b: Buffer | string) => createHash('md5').update(b).digest('base64');
const md5hex = (b: Buffer | string) => createHash('md5').update(b).digest('hex');

t.test('object operations', async (t) => {
  const s = await startServer(t);
  const c = s.client();

  t.test('upload: 200, empty body, quoted Etag, numeric request id', async (t) => {
    const body = 'hello world';
    const r = await raw(s, {
      method: 'PUT', path: '/test/docs/hello.txt', body,
      headers: { 'content-type': 'text/plain', 'content-md5': md5b64(body), 'x-svc-meta-color': 'blue', 'x-svc-tagging': 'a=1&b=two%20words' },
    });
    t.equal(r.status, 200);
    t.equal(r.headers['content-length'], '0');
    t.equal(r.text, '');
    t.equal(r.headers.etag, `"${md5hex(body)}"`);
    t.match(r.headers['x-svc-request-id'], /^\d+$/);
  });

  t.test('get and head carry every metadata header', async (t) => {
    for (const method of ['GET', 'HEAD']) {
      const r = await raw(s, { method, path: '/test/docs/hello.txt' });
      t.equal(r.status, 200, method);
      t.equal(r.headers['content-length'], '11');
      t.equal(r.headers['content-type'], 'text/plain');
      t.equal(r.headers.etag, `"${md5hex('hello world')}"`);
      t.ok(Date.parse(r.headers['last-modified']) > 0, 'Last-Modified is an HTTP date');
      t.equal(r.headers['content-disposition'], 'inline; filename="hello.txt"');
      t.equal(r.headers['access-control-expose-headers'], 'Content-Disposition');
      t.equal(r.headers['accept-ranges'], 'bytes');
      t.equal(r.headers['x-svc-tagging-a'], '1');
      t.equal(r.headers['x-svc-tagging-b'], 'two words');
      t.equal(r.headers['x-svc-tagging-count'], '2');
      t.equal(r.headers['x-svc-meta-color'], 'blue');
      t.match(r.headers['x-svc-request-id'], /^\d+$/);
      t.equal(r.text, method === 'GET' ? 'hello world' : '');
    }
  });

  t.test('keys round-trip: spaces, +, %, unicode, .. segments, 1024 bytes', async (t) => {
    const keys = ['with space/a b.txt', 'plus+sign', 'per%cent%20not-escape', 'ünïcödé/漢字/😀.bin', 'dots/../up/./here/..', 'k'.repeat(1024),
      'a/'.repeat(100) + 'deep', "quote\"'<&>", 'trailing/slash/'];
    for (const k of keys) {
      const body = Buffer.from(`content of ${k}`);
      await c.put('test', k, body);
      t.same(await c.getBuffer('test', k), body, `round-trip ${k.slice(0, 40)}`);
      const info = await c.head('test', k);
      t.equal(typeof info === 'object' && info.size, body.length);
    }
    const listed = new Set<string>();
    for await (const p of c.list('test')) for (const o of p.contents) listed.add(o.key);
    for (const k of keys) t.ok(listed.has(k), `listed ${k.slice(0, 40)}`);
    const long = await raw(s, { method: 'PUT', path: '/test/' + 'k'.repeat(1025), body: 'x' });
    t.equal(long.status, 400);
    t.equal(long.code, 'KeyTooLongError');
    const uni = await raw(s, { method: 'GET', path: '/test/ünïcödé/漢字/😀.bin' });
    t.match(uni.headers['content-disposition'], /filename\*=UTF-8''%F0%9F%98%80\.bin/);
  });

  t.test('range requests', async (t) => {
    const body = Buffer.from('0123456789abcdefghij');
    await c.put('test', 'range.bin', body);
    const cases: Array<[string, number, string, string?]> = [
      ['bytes=0-4', 206, '01234', 'bytes 0-4/20'],
      ['bytes=15-', 206, 'fghij', 'bytes 15-19/20'],
      ['bytes=-3', 206, 'hij', 'bytes 17-19/20'],
      ['bytes=18-100', 206, 'ij', 'bytes 18-19/20'],
      ['bytes=5-2', 200, body.toString()],
    ];
    for (const [range, status, text, cr] of cases) {
      const r = await raw(s, { method: 'GET', path: '/test/range.bin', headers: { range } });
      t.equal(r.status, status, range);
      t.equal(r.text, text, range);
      if (cr) t.equal(r.headers['content-range'], cr);
    }
    const bad = await raw(s, { method: 'GET', path: '/test/range.bin', headers: { range: 'bytes=20-' } });
    t.equal(bad.status, 416);
    t.equal(bad.code, 'InvalidRange');
  });

  t.test('conditional GET and HEAD', async (t) => {
    const etag = `"${md5hex('hello world')}"`;
    const path = '/test/docs/hello.txt';
    const later = new Date(Date.now() + 3600e3).toUTCString();
    const earlier = new Date(Date.now() - 3600e3).toUTCString();
    t.equal((await raw(s, { method: 'GET', path, headers: { 'if-none-match': etag } })).status, 304);
    t.equal((await raw(s, { method: 'HEAD', path, headers: { 'if-none-match': etag } })).status, 304);
    t.equal((await raw(s, { method: 'GET', path, headers: { 'if-none-match': '"other"' } })).status, 200);
    t.equal((await raw(s, { method: 'GET', path, headers: { 'if-match': etag } })).status, 200);
    const pf = await raw(s, { method: 'GET', path, headers: { 'if-match': '"other"' } });
    t.equal(pf.status, 412);
    t.equal(pf.code, 'PreconditionFailed');
    t.equal((await raw(s, { method: 'GET', path, headers: { 'if-modified-since': later } })).status, 304);
    t.equal((await raw(s, { method: 'GET', path, headers: { 'if-modified-since': earlier } })).status, 200);
    t.equal((await raw(s, { method: 'GET', path, headers: { 'if-unmodified-since': earlier } })).status, 412);
    t.equal((await raw(s, { method: 'HEAD', path, headers: { 'if-match': '"x"' } })).text, '', 'HEAD errors carry no body');
  });

  t.test('conditional PUT', async (t) => {
    const e1 = await c.put('test', 'cond.txt', 'v1');
    await t.rejects(c.put('test', 'cond.txt', 'v2', { ifNoneMatch: '*' }), { code: 'PreconditionFailed', status: 412 });
    await t.rejects(c.put('test', 'cond.txt', 'v2', { ifMatch: 'deadbeef' }), { code: 'PreconditionFailed' });
    await c.put('test', 'cond.txt', 'v2', { ifMatch: e1 });
    t.equal((await c.getBuffer('test', 'cond.txt')).toString(), 'v2');
  });

  t.test('copy', async (t) => {
    const r = await raw(s, { method: 'PUT', path: '/test/copies/one.txt', headers: { 'x-svc-copy-source': '/test/docs/hello.txt' } });
    t.equal(r.status, 200);
    t.equal(r.headers['content-type'], 'application/xml');
    t.equal(r.headers.etag, `"${md5hex('hello world')}"`);
    const doc = parseXml(r.text).CopyObjectResult;
    t.equal(doc.ETag, md5hex('hello world'), 'ETag unquoted in the XML');
    t.match(doc.LastModified, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    t.match(r.text, /xmlns="http:\/\/s3\.amazonaws\.com\/doc\/2006-03-01\/"/);
    const info = await c.head('test', 'copies/one.txt');
    t.same(typeof info === 'object' && info.meta, { color: 'blue' }, 'COPY directive keeps metadata');
    t.same(await c.getTags('test', 'copies/one.txt'), { a: '1', b: 'two words' }, 'tags copied');
    await c.copy({ bucket: 'test', key: 'docs/hello.txt' }, 'other', 'x/two.txt', { replaceMetadata: true, meta: { size: 'L' }, contentType: 'text/x', replaceTags: true, tags: { z: '9' } });
    const two = await c.head('other', 'x/two.txt');
    t.same(typeof two === 'object' && [two.meta, two.contentType], [{ size: 'L' }, 'text/x'], 'REPLACE directive, across buckets');
    t.same(await c.getTags('other', 'x/two.txt'), { z: '9' });
    const self = await raw(s, { method: 'PUT', path: '/test/copies/one.txt', headers: { 'x-svc-copy-source': 'test/copies/one.txt' } });
    t.equal(self.status, 400);
    t.equal(self.code, 'InvalidRequest', 'copy onto itself without changes is refused');
    await c.copy({ bucket: 'test', key: 'copies/one.txt' }, 'test', 'copies/one.txt', { replaceMetadata: true, meta: { mode: '33188' } });
    const selfInfo = await c.head('test', 'copies/one.txt');
    t.same(typeof selfInfo === 'object' && selfInfo.meta, { mode: '33188' }, 'copy onto itself with REPLACE updates metadata');
    t.equal((await c.getBuffer('test', 'copies/one.txt')).toString(), 'hello world');
    const missing = await raw(s, { method: 'PUT', path: '/test/x', headers: { 'x-svc-copy-source': '/test/no/such' } });
    t.equal(missing.code, 'NoSuchKey');
    const cond = await raw(s, { method: 'PUT', path: '/test/x', headers: { 'x-svc-copy-source': '/test/docs/hello.txt', 'x-svc-copy-source-if-match': '"nope"' } });
    t.equal(cond.status, 412);
  });

  t.test('tagging endpoints', async (t) => {
    await c.putTags('test', 'docs/hello.txt', { project: 'svcfs', 'with space': 'v a l' });
    t.same(await c.getTags('test', 'docs/hello.txt'), { project: 'svcfs', 'with space': 'v a l' });
    const g = await raw(s, { method: 'GET', path: '/test/docs/hello.txt', query: [['tagging', '']] });
    t.equal(g.headers['content-type'], 'application/xml');
    t.match(g.text, /<Tagging xmlns="[^"]+"><TagSet><Tag><Key>project<\/Key><Value>svcfs<\/Value><\/Tag>/);
    const h = await raw(s, { method: 'HEAD', path: '/test/docs/hello.txt' });
    t.equal(h.headers['x-svc-tagging-count'], '2');
    t.equal(h.headers['x-svc-tagging-with%20space'], 'v a l');
    const d = await raw(s, { method: 'DELETE', path: '/test/docs/hello.txt', query: [['tagging', '']] });
    t.equal(d.status, 204);
    t.same(await c.getTags('test', 'docs/hello.txt'), {});
    t.equal((await c.getBuffer('test', 'docs/hello.txt')).toString(), 'hello world', 'deleting tags leaves the object');
    const eleven = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`k${i}`, 'v']));
    await t.rejects(c.putTags('test', 'docs/hello.txt', eleven), { code: 'InvalidTag', status: 400 });
    const badXml = await raw(s, { method: 'PUT', path: '/test/docs/hello.txt', query: [['tagging', '']], body: '<Tagging><TagSet>' });
    t.equal(badXml.code, 'MalformedXML');
    const xxe = '<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><Tagging><TagSet><Tag><Key>a</Key><Value>&x;</Value></Tag></TagSet></Tagging>';
    const ent = await raw(s, { method: 'PUT', path: '/test/docs/hello.txt', query: [['tagging', '']], body: xxe });
    t.equal(ent.code, 'MalformedXML', 'no DOCTYPE, no entity expansion');
    await t.rejects(c.getTags('test', 'no/such/key'), { code: 'NoSuchKey' });
  });

  t.test('delete', async (t) => {
    await c.put('test', 'gone.txt', 'x');
    const r = await raw(s, { method: 'DELETE', path: '/test/gone.txt' });
    t.equal(r.status, 204);
    t.equal(r.text, '');
    t.equal(await c.head('test', 'gone.txt'), undefined);
    t.equal((await raw(s, { method: 'DELETE', path: '/test/never-existed' })).status, 204, 'deleting a missing key succeeds');
  });

  t.test('errors are S3 XML with the right status', async (t) => {
    const nk = await raw(s, { method: 'GET', path: '/test/no/such/key' });
    t.equal(nk.status, 404);
    t.equal(nk.code, 'NoSuchKey');
    t.equal(nk.headers['content-type'], 'application/xml');
    const doc = parseXml(nk.text).Error;
    t.equal(doc.Resource, '/test/no/such/key');
    t.match(doc.RequestId, /^\d+$/);
    t.equal(doc.RequestId, nk.headers['x-svc-request-id']);
    const nh = await raw(s, { method: 'HEAD', path: '/test/no/such/key' });
    t.equal(nh.status, 404);
    t.equal(nh.text, '');
    t.equal((await raw(s, { method: 'GET', path: '/nosuchbucket/k' })).code, 'NoSuchBucket');
    const mk = await raw(s, { method: 'PUT', path: '/newbucket' });
    t.equal(mk.status, 501);
    t.equal(mk.code, 'NotImplemented');
    t.equal((await raw(s, { method: 'POST', path: '/test/k' })).code, 'MethodNotAllowed');
    const md = await raw(s, { method: 'PUT', path: '/test/md5', body: 'abc', headers: { 'content-md5': 'not-base64!' } });
    t.equal(md.code, 'InvalidDigest');
  });

  t.test('request logs name method, key, status, duration and no secret', async (t) => {
    const log = s.logs.join('');
    t.match(log, /"method":"PUT","bucket":"test","key":"docs\/hello.txt","status":200,"ms":/);
    t.notMatch(log, /a{64}/, 'no secret');
    t.notMatch(log, /Signature=|X-Svc-Signature|[0-9a-f]{64}/, 'no signature');
  });
});
