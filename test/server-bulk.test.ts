// Batch delete, listing, multipart, streaming memory, persistence and the
// aws dialect's streaming bodies and checksums.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { getGlobalDispatcher } from 'undici';
import { isLoopback, SvcClient } from '../src/wire/client';
import { AWS } from '../src/wire/dialect';
import { amzTimestamp, chunkStringToSign, encodePath, sha256Hex, signatureOf, signingKey, signRequest } from '../src/wire/signer';
import { buildXml, parseXml } from '../src/wire/xml';
import { JSON_LISTING } from '../src/wire/listing';
import { raw } from './helpers/http';
import { ADMIN, startServer } from './helpers/server';

const md5b64 = (b: Buffer | string) => createHash('md5').update(b).digest('base64');
const MiB = 1024 * 1024;

t.test('batch delete', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const keys = Array.from({ length: 990 }, (_, i) => `batch/${String(i).padStart(4, '0')}`);
  await Promise.all(keys.slice(0, 500).map((k) => c.put('test', k, k)));
  const bad = Array.from({ length: 10 }, (_, i) => 'x'.repeat(1025 + i));
  const all = [...keys, ...bad];
  t.equal(all.length, 1000);

  const body = buildXml('Delete', { Object: all.map((Key) => ({ Key })) });
  const r = await raw(s, { method: 'POST', path: '/test', query: [['delete', '']], body, headers: { 'content-md5': md5b64(body), 'content-type': 'application/xml' } });
  t.equal(r.status, 200);
  t.equal(r.headers['content-type'], 'application/xml');
  const doc = parseXml(r.text).DeleteResult;
  t.equal(doc.Deleted.length, 990, 'verbose: every deleted key listed (missing ones count as deleted)');
  t.equal(doc.Error.length, 10, 'the failing keys are listed as errors');
  t.same(doc.Error.map((e: any) => e.Code), Array(10).fill('KeyTooLongError'));
  t.equal(doc.Error[0].Key, bad[0]);
  t.equal(await c.head('test', keys[0]), undefined);

  await Promise.all(keys.slice(0, 100).map((k) => c.put('test', k, k)));
  const qbody = buildXml('Delete', { Quiet: true, Object: [...keys.slice(0, 100), bad[0]].map((Key) => ({ Key })) });
  const q = await raw(s, { method: 'POST', path: '/test', query: [['delete', '']], body: qbody, headers: { 'content-md5': md5b64(qbody) } });
  const qdoc = parseXml(q.text).DeleteResult;
  t.equal(qdoc.Deleted, undefined, 'quiet: no Deleted entries');
  t.equal(qdoc.Error.length, 1, 'quiet: failures still listed');
  let left = 0;
  for await (const p of c.list('test', { prefix: 'batch/' })) left += p.contents.length;
  t.equal(left, 0);

  const big = buildXml('Delete', { Object: Array.from({ length: 1001 }, (_, i) => ({ Key: `k${i}` })) });
  const over = await raw(s, { method: 'POST', path: '/test', query: [['delete', '']], body: big, headers: { 'content-md5': md5b64(big) } });
  t.equal(over.status, 400);
  t.equal(over.code, 'MalformedXML', '1001 keys refused');
  const noMd5 = await raw(s, { method: 'POST', path: '/test', query: [['delete', '']], body: qbody });
  t.equal(noMd5.status, 400);
  t.equal(noMd5.code, 'InvalidRequest', 'Content-MD5 required');
  await c.put('test', 'survivor', 'x');
  const sb = buildXml('Delete', { Object: [{ Key: 'survivor' }] });
  const wrongMd5 = await raw(s, { method: 'POST', path: '/test', query: [['delete', '']], body: sb, headers: { 'content-md5': md5b64('other') } });
  t.equal(wrongMd5.code, 'BadDigest');
  t.ok(await c.head('test', 'survivor'), 'nothing deleted on a bad digest');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(Buffer.from(sb)));
  const withCrc = await raw(s, { method: 'POST', path: '/test', query: [['delete', '']], body: sb, dialect: AWS, headers: { 'x-amz-checksum-crc32': crc.toString('base64'), 'x-amz-sdk-checksum-algorithm': 'CRC32' } });
  t.equal(withCrc.status, 200, 'aws dialect: a flexible checksum stands in for Content-MD5');
  t.equal(await c.head('test', 'survivor'), undefined);
  const many = await c.deleteMany('test', Array.from({ length: 2500 }, (_, i) => `chunked/${i}`), false);
  t.equal(many.deleted.length, 2500, 'the client sends batches of at most 1000');
});

t.test('listing: V2 and V1, prefix, delimiter, pagination at 1000', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const keys: string[] = [];
  for (let i = 0; i < 2100; i++) keys.push(`many/f${String(i).padStart(5, '0')}`);
  for (const d of ['a', 'b', 'c']) for (let i = 0; i < 3; i++) keys.push(`tree/${d}/x${i}`);
  keys.push('tree/top.txt', 'tree/', 'tree/b/');
  for (let i = 0; i < keys.length; i += 100) await Promise.all(keys.slice(i, i + 100).map((k) => c.put('test', k, '')));

  const pages = [];
  for await (const p of c.list('test', { prefix: 'many/' })) pages.push(p);
  t.same(pages.map((p) => p.contents.length), [1000, 1000, 100], 'pages cut at 1000');
  t.same(pages.flatMap((p) => p.contents.map((o) => o.key)), keys.slice(0, 2100), 'every key once, in order');
  const capped = await raw(s, { method: 'GET', path: '/test', query: [['list-type', '2'], ['max-keys', '5000']] });
  const cdoc = parseXml(capped.text).ListBucketResult;
  t.equal(cdoc.Contents.length, 1000, 'max-keys above 1000 still cut at 1000');
  t.equal(cdoc.IsTruncated, 'true');
  t.equal(cdoc.MaxKeys, '1000');

  const tree = await c.listPage('test', { prefix: 'tree/', delimiter: '/' });
  t.same(tree.prefixes, ['tree/a/', 'tree/b/', 'tree/c/']);
  t.same(tree.contents.map((o) => o.key), ['tree/', 'tree/top.txt']);
  const small = [];
  for await (const p of c.list('test', { prefix: 'tree/', delimiter: '/', maxKeys: 2 })) small.push([...p.prefixes, ...p.contents.map((o) => o.key)]);
  t.same(small, [['tree/a/', 'tree/'], ['tree/b/', 'tree/c/'], ['tree/top.txt']], 'paged with a delimiter, two entries a page');
  t.same(small.flat().sort(), ['tree/', 'tree/a/', 'tree/b/', 'tree/c/', 'tree/top.txt'], 'common prefixes are not repeated across pages');
  const root = await c.listPage('test', { delimiter: '/' });
  t.same(root.prefixes, ['many/', 'tree/']);
  const after = await c.listPage('test', { prefix: 'many/', startAfter: 'many/f02097' });
  t.same(after.contents.map((o) => o.key), ['many/f02098', 'many/f02099'], 'start-after');

  const v1 = await raw(s, { method: 'GET', path: '/test', query: [['prefix', 'many/'], ['max-keys', '3'], ['marker', 'many/f00010']] });
  const v1doc = parseXml(v1.text).ListBucketResult;
  t.same(v1doc.Contents.map((o: any) => o.Key), ['many/f00011', 'many/f00012', 'many/f00013'], 'V1 with marker');
  t.equal(v1doc.Marker, 'many/f00010');
  t.equal(v1doc.IsTruncated, 'true');
  const v1d = parseXml((await raw(s, { method: 'GET', path: '/test', query: [['delimiter', '/'], ['max-keys', '1']] })).text).ListBucketResult;
  t.equal(v1d.NextMarker, 'many/', 'V1 NextMarker with a delimiter');
  const entry = tree.contents[1];
  t.equal(entry.size, 0);
  t.match(entry.etag, /^[0-9a-f]{32}$/);
  const bad = await raw(s, { method: 'GET', path: '/test', query: [['list-type', '2'], ['continuation-token', '!!!']] });
  t.equal(bad.code, 'InvalidArgument');
});

t.test('multipart upload', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const parts = [randomBytes(5 * MiB), randomBytes(5 * MiB), randomBytes(1234)];
  const id = await c.createMultipart('test', 'mp/big.bin', { contentType: 'application/x-test', meta: { mode: '33188' }, tags: { kind: 'mp' } });
  const etags: string[] = [];
  for (let i = parts.length - 1; i >= 0; i--) etags[i] = await c.uploadPart('test', 'mp/big.bin', id, i + 1, parts[i]);
  t.same((await c.listParts('test', 'mp/big.bin', id)).map((p) => [p.partNumber, p.size]), [[1, 5 * MiB], [2, 5 * MiB], [3, 1234]]);
  await t.rejects(c.completeMultipart('test', 'mp/big.bin', id, [{ partNumber: 2, etag: etags[1] }, { partNumber: 1, etag: etags[0] }]), { code: 'InvalidPartOrder' });
  await t.rejects(c.completeMultipart('test', 'mp/big.bin', id, [{ partNumber: 1, etag: 'f'.repeat(32) }]), { code: 'InvalidPart' });
  const etag = await c.completeMultipart('test', 'mp/big.bin', id, etags.map((e, i) => ({ partNumber: i + 1, etag: e })));
  const expect = createHash('md5').update(Buffer.concat(etags.map((e) => Buffer.from(e, 'hex')))).digest('hex') + '-3';
  t.equal(etag, expect, 'ETag is the MD5 of the part MD5s, dash, part count');
  const whole = Buffer.concat(parts);
  t.ok((await c.getBuffer('test', 'mp/big.bin')).equals(whole), 'content byte-exact');
  const mid = await c.getBuffer('test', 'mp/big.bin', [5 * MiB - 10, 5 * MiB + 9]);
  t.ok(mid.equals(whole.subarray(5 * MiB - 10, 5 * MiB + 10)), 'a range across the part boundary');
  const info = await c.head('test', 'mp/big.bin');
  t.same(typeof info === 'object' && [info.size, info.contentType, info.meta, info.tagCount], [whole.length, 'application/x-test', { mode: '33188' }, 1]);
  await t.rejects(c.listParts('test', 'mp/big.bin', id), { code: 'NoSuchUpload' }, 'completed uploads are gone');

  const small = await c.createMultipart('test', 'mp/small.bin');
  const e1 = await c.uploadPart('test', 'mp/small.bin', small, 1, randomBytes(1000));
  const e2 = await c.uploadPart('test', 'mp/small.bin', small, 2, randomBytes(1000));
  await t.rejects(c.completeMultipart('test', 'mp/small.bin', small, [{ partNumber: 1, etag: e1 }, { partNumber: 2, etag: e2 }]), { code: 'EntityTooSmall' });
  const list = await raw(s, { method: 'GET', path: '/test', query: [['uploads', '']] });
  t.match(list.text, /<Key>mp\/small.bin<\/Key><UploadId>/);
  await c.abortMultipart('test', 'mp/small.bin', small);
  await t.rejects(c.uploadPart('test', 'mp/small.bin', small, 3, 'x'), { code: 'NoSuchUpload' });
  const countBlobs = () => fs.readdirSync(path.join(s.dataDir, 'blobs')).flatMap((d) => fs.readdirSync(path.join(s.dataDir, 'blobs', d))).length;
  // blobs are unlinked just after the commit that released them: give that a moment
  for (let i = 0; i < 100 && countBlobs() !== 3; i++) await new Promise((r) => setTimeout(r, 20));
  t.equal(countBlobs(), 3, 'aborted parts are removed; the object keeps its three part blobs');
});

function rssKiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
}

t.test('50 MiB upload and download stream with flat memory; restart keeps everything', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const file = path.join(s.dataDir, '..', `big-${process.pid}.bin`);
  const fd = fs.openSync(file, 'w');
  for (let i = 0; i < 50; i++) fs.writeSync(fd, randomBytes(MiB));
  fs.closeSync(fd);
  t.teardown(() => fs.rmSync(file, { force: true }));
  // warm up buffers and heap with a smaller body first, then measure the 50 MiB one
  await c.put('test', 'warmup', { file, start: 0, length: 16 * MiB });
  for await (const _ of (await c.get('test', 'warmup')).body) void _;
  const before = rssKiB(s.proc.pid!);
  let peak = before;
  const timer = setInterval(() => { peak = Math.max(peak, rssKiB(s.proc.pid!)); }, 20);
  const etag = await c.put('test', 'big/fifty.bin', { file, start: 0, length: 50 * MiB });
  const got = createHash('md5');
  const { body } = await c.get('test', 'big/fifty.bin');
  for await (const chunk of body) got.update(chunk);
  clearInterval(timer);
  const want = createHash('md5').update(fs.readFileSync(file)).digest('hex');
  t.equal(etag, want);
  t.equal(got.digest('hex'), want, 'downloaded byte-exact');
  t.ok(peak - before < 30 * 1024, `server RSS grew by ${Math.round((peak - before) / 1024)} MiB for a 50 MiB body (limit 30)`);

  await c.put('test', 'persist/one.txt', 'still here', { meta: { mode: '33188' }, tags: { t: '1' }, publicRead: true });
  const up = await c.createMultipart('test', 'persist/pending.bin');
  await c.uploadPart('test', 'persist/pending.bin', up, 1, randomBytes(100));
  await s.stop('SIGTERM');
  fs.writeFileSync(path.join(s.dataDir, 'tmp', 'stray-temp'), 'x');
  fs.mkdirSync(path.join(s.dataDir, 'blobs', 'zz'), { recursive: true });
  fs.writeFileSync(path.join(s.dataDir, 'blobs', 'zz', 'zzorphan'), 'x');
  await s.restart();
  const c2 = s.client();
  t.equal((await c2.getBuffer('test', 'persist/one.txt')).toString(), 'still here', 'object survives restart');
  const info = await c2.head('test', 'persist/one.txt');
  t.same(typeof info === 'object' && info.meta, { mode: '33188' });
  t.same(await c2.getTags('test', 'persist/one.txt'), { t: '1' });
  t.equal((await raw(s, { method: 'GET', path: '/test/persist/one.txt', creds: null })).status, 200, 'public-read survives');
  t.equal((await c2.listParts('test', 'persist/pending.bin', up)).length, 1, 'pending multipart upload survives');
  const h = createHash('md5');
  for await (const chunk of (await c2.get('test', 'big/fifty.bin')).body) h.update(chunk);
  t.equal(h.digest('hex'), want);
  t.same(fs.readdirSync(path.join(s.dataDir, 'tmp')), [], 'stray temporary swept at start');
  t.notOk(fs.existsSync(path.join(s.dataDir, 'blobs', 'zz', 'zzorphan')), 'orphan blob swept at start');
  t.match(s.logs.join(''), /removed unreferenced/);
});

t.test('aws dialect: aws-chunked bodies and flexible checksums', async (t) => {
  const s = await startServer(t);
  const c = s.client({ dialect: AWS });
  const data = randomBytes(200_000);
  const crcOf = (b: Buffer) => { const o = Buffer.alloc(4); o.writeUInt32BE(zlib.crc32(b)); return o.toString('base64'); };

  // unsigned chunks with a checksum trailer: what current AWS SDKs send by default
  const chunks = [data.subarray(0, 65536), data.subarray(65536, 131072), data.subarray(131072)];
  const framed = Buffer.concat([...chunks.flatMap((ch) => [Buffer.from(ch.length.toString(16) + '\r\n'), ch, Buffer.from('\r\n')]),
    Buffer.from(`0\r\nx-amz-checksum-crc32:${crcOf(data)}\r\n\r\n`)]);
  const r = await raw(s, { method: 'PUT', path: '/test/chunked/unsigned.bin', body: framed, dialect: AWS, payloadHash: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
    headers: { 'content-encoding': 'aws-chunked', 'x-amz-decoded-content-length': String(data.length), 'x-amz-trailer': 'x-amz-checksum-crc32' } });
  t.equal(r.status, 200);
  t.equal(r.headers['x-amz-checksum-crc32'], crcOf(data));
  t.ok((await c.getBuffer('test', 'chunked/unsigned.bin')).equals(data), 'decoded content stored');
  const info = await c.head('test', 'chunked/unsigned.bin');
  t.equal(typeof info === 'object' && info.size, data.length);

  const badTrailer = Buffer.from(framed.toString('latin1').replace(crcOf(data), crcOf(Buffer.from('x'))), 'latin1');
  const rb = await raw(s, { method: 'PUT', path: '/test/chunked/bad.bin', body: badTrailer, dialect: AWS, payloadHash: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
    headers: { 'content-encoding': 'aws-chunked', 'x-amz-decoded-content-length': String(data.length), 'x-amz-trailer': 'x-amz-checksum-crc32' } });
  t.equal(rb.code, 'BadDigest', 'a wrong trailing checksum is refused');
  t.equal(await c.head('test', 'chunked/bad.bin'), undefined);

  // signed chunks: STREAMING-AWS4-HMAC-SHA256-PAYLOAD
  const now = new Date();
  const ts = amzTimestamp(now);
  const { url } = { url: new URL(s.url) };
  const pth = encodePath('/test/chunked/signed.bin');
  const sizes = [65536, data.length - 65536];
  const encodedLen = sizes.reduce((n, sz) => n + sz.toString(16).length + ';chunk-signature='.length + 64 + 4 + sz, 0) + 1 + ';chunk-signature='.length + 64 + 4;
  const h = signRequest({ dialect: AWS, credentials: ADMIN, region: 'us-east-1', method: 'PUT', url, path: pth, now,
    headers: { 'content-encoding': 'aws-chunked', 'x-amz-decoded-content-length': String(data.length), 'content-length': String(encodedLen) },
    payloadHash: 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD' });
  const seed = h.authorization.split('Signature=')[1];
  const key = signingKey(AWS, ADMIN.secretAccessKey, ts.slice(0, 8), 'us-east-1');
  const scope = `${ts.slice(0, 8)}/us-east-1/s3/aws4_request`;
  const frame = (corrupt: boolean) => {
    let prev = seed;
    const out: Buffer[] = [];
    for (const ch of [data.subarray(0, 65536), data.subarray(65536), Buffer.alloc(0)]) {
      const sig = signatureOf(key, chunkStringToSign(AWS, ts, scope, prev, sha256Hex(ch)));
      prev = sig;
      out.push(Buffer.from(`${ch.length.toString(16)};chunk-signature=${sig}\r\n`), corrupt && ch.length ? Buffer.from(ch).fill(1, 0, 1) : ch, Buffer.from('\r\n'));
    }
    return Buffer.concat(out);
  };
  const send = async (body: Buffer) => {
    const res = await getGlobalDispatcher().request({ origin: url.origin, path: pth, method: 'PUT', headers: h, body });
    return { status: res.statusCode, text: await res.body.text() };
  };
  const good = frame(false);
  t.equal(good.length, encodedLen);
  const sr = await send(good);
  t.equal(sr.status, 200, 'signed chunks verified');
  t.ok((await c.getBuffer('test', 'chunked/signed.bin')).equals(data));
  const br = await send(frame(true));
  t.match(br.text, /SignatureDoesNotMatch/, 'a chunk altered in transit is refused');
  t.ok((await c.getBuffer('test', 'chunked/signed.bin')).equals(data), 'previous content untouched');

  for (const [alg, header] of [['sha256', 'x-amz-checksum-sha256'], ['sha1', 'x-amz-checksum-sha1']] as const) {
    const v = createHash(alg).update(data).digest('base64');
    const ok = await raw(s, { method: 'PUT', path: `/test/ck/${alg}`, body: data, dialect: AWS, headers: { [header]: v } });
    t.equal(ok.status, 200, `${alg} checksum accepted`);
    const no = await raw(s, { method: 'PUT', path: `/test/ck/${alg}-bad`, body: data, dialect: AWS, headers: { [header]: createHash(alg).update('x').digest('base64') } });
    t.equal(no.code, 'BadDigest', `${alg} mismatch refused`);
  }
  t.same(fs.readdirSync(path.join(s.dataDir, 'tmp')), [], 'no temporary files left');
});

// svcfs serve's JSON listing (asked for by svcfs mount) says what the XML page
// says, entry for entry: keys XML cannot carry as they are, metadata, markers,
// pages and their continuation.
t.test('listing as JSON (svcfs-format=json): the same pages as XML', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const byBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
  const odd = ['j/a&b<c>"q"', 'j/sp ace+plus%25', 'j/ünï €', 'j/tab\tx', 'j/z'].sort(byBytes);
  for (const k of odd) await c.put('test', k, 'x', { meta: { mode: '33188', note: 'a&b <c> ü' } });
  await c.put('test', 'j/d/', '', { meta: { mode: '16877' } });
  await c.put('test', 'j/d/inner', 'y');
  await c.put('test', 'j/e/inner', 'y');
  const both = async (query: Array<[string, string]>) => {
    const x = await raw(s, { method: 'GET', path: '/test', query });
    const j = await raw(s, { method: 'GET', path: '/test', query: [...query, [JSON_LISTING.param, 'json']] });
    t.equal(j.status, 200);
    t.equal(j.headers['content-type'], JSON_LISTING.contentType);
    return { xml: parseXml(x.text).ListBucketResult, json: JSON.parse(j.text) };
  };
  const asArray = (v: any) => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
  const metaOf = (um: any) => Object.fromEntries(asArray(um?.Entry).map((e: any) => [e.Name, e.Value]));

  const { xml, json } = await both([['list-type', '2'], ['prefix', 'j/'], ['delimiter', '/'], ['metadata', 'true']]);
  t.same(json.contents.map((o: any) => o.key), asArray(xml.Contents).map((o: any) => o.Key), 'the same keys, exact');
  t.same(json.contents.map((o: any) => o.key), odd);
  t.same(json.contents.map((o: any) => [o.etag, String(o.size), new Date(o.lastModified).toISOString()]),
    asArray(xml.Contents).map((o: any) => [o.ETag.replace(/"/g, ''), o.Size, o.LastModified]), 'ETags, sizes and times');
  t.same(json.contents.map((o: any) => o.meta), asArray(xml.Contents).map((o: any) => metaOf(o.UserMetadata)), 'metadata');
  t.same(json.contents[0].meta, { mode: '33188', note: 'a&b <c> ü' });
  t.same(json.prefixes, [{ prefix: 'j/d/', meta: { mode: '16877' } }, { prefix: 'j/e/' }], 'common prefixes, with their marker\'s metadata');
  t.equal(json.isTruncated, false);

  const plain = (await both([['list-type', '2'], ['prefix', 'j/']])).json;
  t.equal(plain.contents[0].meta, undefined, 'no metadata unless asked for');

  // pages: the same cut and the same continuation, which either format accepts
  const p1 = await both([['list-type', '2'], ['prefix', 'j/'], ['delimiter', '/'], ['max-keys', '4']]);
  t.equal(p1.json.isTruncated, true);
  t.equal(p1.json.next, p1.xml.NextContinuationToken);
  const p2 = await both([['list-type', '2'], ['prefix', 'j/'], ['delimiter', '/'], ['max-keys', '4'], ['continuation-token', p1.json.next]]);
  const entries = (j: any) => [...j.contents.map((o: any) => o.key), ...j.prefixes.map((p: any) => p.prefix)];
  t.same([...entries(p1.json), ...entries(p2.json)].sort(byBytes), [...odd, 'j/d/', 'j/e/'].sort(byBytes), 'two pages hold every entry once');
  t.equal(p2.json.isTruncated, false);
  t.same(p2.json.contents.map((o: any) => o.key), asArray(p2.xml.Contents).map((o: any) => o.Key));
  const v1 = await both([['prefix', 'j/'], ['delimiter', '/'], ['max-keys', '1']]);
  t.equal(v1.json.next, v1.xml.NextMarker, 'V1: the next marker');

  // the client reads either: the JSON page where the store answers it, as the XML one would read
  const page = await c.listPage('test', { prefix: 'j/', delimiter: '/', metadata: true });
  const xmlPage = await c.listPage('test', { prefix: 'j/', delimiter: '/' });
  t.same(page.contents.map((o) => o.key), xmlPage.contents.map((o) => o.key));
  t.same(page.contents.map((o) => [o.etag, o.size, o.lastModified.getTime()]), xmlPage.contents.map((o) => [o.etag, o.size, o.lastModified.getTime()]));
  t.same(page.prefixMeta.get('j/d/'), { mode: '16877' });
});

t.test('uploads: the payload hash, signed or UNSIGNED-PAYLOAD (payload_hash)', async (t) => {
  const s = await startServer(t);
  // between client and server: records each upload's payload hash header and flips one byte of every body
  const seen: string[] = [];
  const proxy = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      if (req.method === 'PUT' && body.length) {
        seen.push(String(req.headers['x-svc-content-sha256']));
        body[body.length >> 1] ^= 0xff;
      }
      const up = new URL(s.url);
      const out = http.request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        ur.pipe(res);
      });
      out.end(body);
    });
  });
  await new Promise<void>((ok) => proxy.listen(0, '127.0.0.1', ok));
  t.teardown(() => proxy.close());
  const at = (host: string, payloadHash?: 'auto' | 'always' | 'never') =>
    new SvcClient({ endpoint: `http://${host}:${(proxy.address() as AddressInfo).port}`, credentials: ADMIN, payloadHash, maxAttempts: 1 });
  const body = randomBytes(MiB);

  // signed: the store refuses the changed bytes, and nothing is stored
  const signed = at('127.0.0.1', 'always');
  t.teardown(() => signed.close());
  await t.rejects(signed.put('test', 'payload/signed', body), { code: 'XSvcContentSHA256Mismatch' });
  t.equal(seen.pop(), sha256Hex(body), 'the body went with its SHA-256');
  t.equal(await s.client().head('test', 'payload/signed'), undefined, 'nothing stored');
  const id = await signed.createMultipart('test', 'payload/mp');
  await t.rejects(signed.uploadPart('test', 'payload/mp', id, 1, body), { code: 'XSvcContentSHA256Mismatch' }, 'a part too');
  t.equal(seen.pop(), sha256Hex(body));

  // auto, to a loopback address (by number or by name), and never: UNSIGNED-PAYLOAD (no wire to change the bytes)
  for (const [host, mode] of [['127.0.0.1', undefined], ['localhost', 'auto'], ['127.0.0.1', 'never']] as const) {
    const c = at(host, mode);
    await c.put('test', `payload/${host}-${mode}`, body);
    await c.close();
    t.equal(seen.pop(), 'UNSIGNED-PAYLOAD', `${host}, ${mode ?? 'default'}: unsigned`);
  }
  t.ok(isLoopback('127.0.0.1') && isLoopback('127.8.9.10') && isLoopback('[::1]') && isLoopback('localhost'));
  t.notOk(isLoopback('10.0.0.1') || isLoopback('128.0.0.1') || isLoopback('example.com') || isLoopback('127.example.com'));
  // auto, to another host: signed (the client only decides; nothing is sent)
  t.equal(new SvcClient({ endpoint: 'http://10.0.0.1:9000', payloadHash: 'auto' }).unsignedUploads, false);
  t.equal(new SvcClient({ endpoint: 'https://10.0.0.1:9000' }).unsignedUploads, true, 'TLS protects the bytes');
});

t.test('ranged GET straight into a buffer (getRangeInto): the bytes, and errors with their codes', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const data = randomBytes(3 * MiB + 17);
  await c.put('test', 'into/obj', data);
  const etag = (await c.head('test', 'into/obj') as { etag: string }).etag;
  const into = Buffer.alloc(2 * MiB);
  await c.getRangeInto('test', 'into/obj', MiB + 5, 3 * MiB + 4, into, { ifMatch: etag });
  t.ok(into.equals(data.subarray(MiB + 5, 3 * MiB + 5)), '2 MiB from the middle, byte-exact');
  const small = Buffer.alloc(10);
  await c.getRangeInto('test', 'into/obj', 0, 9, small);
  t.ok(small.equals(data.subarray(0, 10)));
  await t.rejects(c.getRangeInto('test', 'into/obj', 0, 9, small, { ifMatch: 'f'.repeat(32) }), { code: 'PreconditionFailed', status: 412 }, 'another version: 412 with its code');
  await t.rejects(c.getRangeInto('test', 'into/none', 0, 9, small), { code: 'NoSuchKey', status: 404 });
});
