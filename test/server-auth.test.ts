// Authentication and permissions: header and pre-signed forms in both
// dialects, v2, unsigned payloads, skew, expiry, tampering, anonymous access.
import t from 'tap';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { getGlobalDispatcher } from 'undici';
import { AWS, SVC } from '../src/wire/dialect';
import { encodePath, presignedUrlString, v2Signature, v2StringToSign } from '../src/wire/signer';
import { raw, urlFor } from './helpers/http';
import { ADMIN, READER, startServer, tmpDir } from './helpers/server';

const exec = promisify(execFile);

async function fetchUrl(url: string, method = 'GET', body?: string, headers: Record<string, string> = {}) {
  const u = new URL(url);
  const pathAndQuery = url.slice(u.origin.length);
  const r = await getGlobalDispatcher().request({ origin: u.origin, path: pathAndQuery, method: method as any, body, headers });
  const text = await r.body.text();
  return { status: r.statusCode, text, code: /<Code>([^<]+)<\/Code>/.exec(text)?.[1] };
}

t.test('authentication', async (t) => {
  const s = await startServer(t);
  const admin = s.client();
  await admin.put('test', 'private.txt', 'secret stuff');
  await admin.put('test', 'public.txt', 'for everyone', { publicRead: true });

  t.test('anonymous: public-read objects only', async (t) => {
    const pub = await raw(s, { method: 'GET', path: '/test/public.txt', creds: null });
    t.equal(pub.status, 200);
    t.equal(pub.text, 'for everyone');
    t.equal((await raw(s, { method: 'HEAD', path: '/test/public.txt', creds: null })).status, 200);
    for (const [method, p] of [['GET', '/test/private.txt'], ['HEAD', '/test/private.txt'], ['GET', '/test/missing'], ['PUT', '/test/public.txt'],
      ['DELETE', '/test/public.txt'], ['GET', '/test'], ['GET', '/test/public.txt?tagging']]) {
      const [pp, q] = p.split('?');
      const r = await raw(s, { method, path: pp, query: q ? [[q, '']] : [], creds: null, body: method === 'PUT' ? 'x' : undefined });
      t.equal(r.status, 403, `anonymous ${method} ${p}`);
      if (method !== 'HEAD') t.equal(r.code, 'AccessDenied');
    }
    t.equal((await admin.getBuffer('test', 'public.txt')).toString(), 'for everyone', 'anonymous writes changed nothing');
    await admin.copy({ bucket: 'test', key: 'private.txt' }, 'test', 'made-public.txt', { publicRead: true });
    t.equal((await raw(s, { method: 'GET', path: '/test/made-public.txt', creds: null })).status, 200, 'public-read on copy');
  });

  t.test('permissions: a read-only user', async (t) => {
    const reader = s.client({ creds: READER });
    t.equal((await reader.getBuffer('test', 'private.txt')).toString(), 'secret stuff');
    await t.rejects(reader.put('test', 'r.txt', 'x'), { code: 'AccessDenied', status: 403 });
    await t.rejects(reader.delete('test', 'private.txt'), { code: 'AccessDenied' });
    await t.rejects(reader.deleteMany('test', ['private.txt']), { code: 'AccessDenied' });
    await t.rejects(reader.putTags('test', 'private.txt', { a: 'b' }), { code: 'AccessDenied' });
    await t.rejects(reader.copy({ bucket: 'test', key: 'private.txt' }, 'test', 'c.txt'), { code: 'AccessDenied' });
    await t.rejects(reader.createMultipart('test', 'm'), { code: 'AccessDenied' });
    t.equal(await admin.head('test', 'r.txt'), undefined);
  });

  t.test('signature failures', async (t) => {
    const wrong = await raw(s, { method: 'GET', path: '/test/private.txt', creds: { ...ADMIN, secretAccessKey: 'c'.repeat(64) } });
    t.equal(wrong.status, 403);
    t.equal(wrong.code, 'SignatureDoesNotMatch');
    const unknown = await raw(s, { method: 'GET', path: '/test/private.txt', creds: { accessKeyId: 'UNKNOWNKEY0000000000', secretAccessKey: 'c'.repeat(64) } });
    t.equal(unknown.code, 'InvalidAccessKeyId');
    const tampered = await raw(s, { method: 'PUT', path: '/test/t.txt', body: 'x', headers: { 'x-svc-meta-a': '1' }, tamper: (h) => { h['x-svc-meta-a'] = '2'; } });
    t.equal(tampered.code, 'SignatureDoesNotMatch', 'a signed header altered in transit');
    const otherKey = await raw(s, { method: 'GET', path: '/test/private.txt', tamper: (h) => { h.authorization = h.authorization.replace('Signature=', 'Signature=0').slice(0, -1); } });
    t.equal(otherKey.code, 'SignatureDoesNotMatch');
    const future = await raw(s, { method: 'GET', path: '/test/private.txt', now: new Date(Date.now() + 16 * 60e3) });
    t.equal(future.status, 403);
    t.equal(future.code, 'RequestTimeTooSkewed');
    const past = await raw(s, { method: 'GET', path: '/test/private.txt', now: new Date(Date.now() - 16 * 60e3) });
    t.equal(past.code, 'RequestTimeTooSkewed');
    const ok = await raw(s, { method: 'GET', path: '/test/private.txt', now: new Date(Date.now() + 10 * 60e3) });
    t.equal(ok.status, 200, '10 minutes ahead is within the allowance');
    const scope = await raw(s, { method: 'GET', path: '/test/private.txt', tamper: (h) => {
      h.authorization = h.authorization.replace(/Credential=(\w+)\/(\d{8})/, (_m, ak) => `Credential=${ak}/20200101`);
    } });
    t.equal(scope.status, 400);
    t.equal(scope.code, 'AuthorizationHeaderMalformed', 'credential scope date must match the request date');
    const malformed = await raw(s, { method: 'GET', path: '/test/private.txt', tamper: (h) => { h.authorization = 'SVC4-HMAC-SHA256 Credential=x'; } });
    t.equal(malformed.code, 'AuthorizationHeaderMalformed');
    t.notMatch(s.logs.join(''), /a{64}/, 'no secret in logs');
  });

  t.test('payload hashes', async (t) => {
    const body = 'the body as signed';
    const diff = await raw(s, { method: 'PUT', path: '/test/sha.txt', body, sendBody: 'the body XX signed' });
    t.equal(diff.status, 400);
    t.equal(diff.code, 'XSvcContentSHA256Mismatch');
    t.equal(await admin.head('test', 'sha.txt'), undefined, 'nothing stored');
    const diffAws = await raw(s, { method: 'PUT', path: '/test/sha.txt', body, sendBody: 'the body XX signed', dialect: AWS });
    t.equal(diffAws.code, 'XAmzContentSHA256Mismatch');
    await admin.put('test', 'keep.txt', 'original');
    const md5Bad = await raw(s, { method: 'PUT', path: '/test/keep.txt', body: 'replacement', headers: { 'content-md5': createHash('md5').update('other').digest('base64') } });
    t.equal(md5Bad.status, 400);
    t.equal(md5Bad.code, 'BadDigest');
    t.equal((await admin.getBuffer('test', 'keep.txt')).toString(), 'original', 'previous object untouched');
    const shaBad = await raw(s, { method: 'PUT', path: '/test/keep.txt', body: 'replacement', sendBody: 'replacemenT' });
    t.equal(shaBad.code, 'XSvcContentSHA256Mismatch');
    t.equal((await admin.getBuffer('test', 'keep.txt')).toString(), 'original', 'previous object untouched');
    const unsigned = await raw(s, { method: 'PUT', path: '/test/unsigned.txt', body, payloadHash: 'UNSIGNED-PAYLOAD' });
    t.equal(unsigned.status, 200, 'UNSIGNED-PAYLOAD accepted');
    const noHeader = await raw(s, { method: 'PUT', path: '/test/nohdr.txt', body, omitContentSha256: true });
    t.equal(noHeader.status, 200, 'no content-sha256 header: the server hashes the body it received');
    t.equal((await admin.getBuffer('test', 'nohdr.txt')).toString(), body);
    const noHeaderBad = await raw(s, { method: 'PUT', path: '/test/nohdr2.txt', body, omitContentSha256: true, sendBody: 'something else!!!!' });
    t.equal(noHeaderBad.code, 'SignatureDoesNotMatch', 'and a different body breaks the signature');
    t.equal(await admin.head('test', 'nohdr2.txt'), undefined);
    t.same(fs.readdirSync(path.join(s.dataDir, 'tmp')), [], 'refused uploads leave no temporary files');
  });

  t.test('curl --aws-sigv4 signs the svc dialect by itself', async (t) => {
    const f = path.join(tmpDir('curl'), 'up.txt');
    fs.writeFileSync(f, 'uploaded by curl\n');
    const user = `${ADMIN.accessKeyId}:${ADMIN.secretAccessKey}`;
    const put = await exec('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code}', '--aws-sigv4', 'svc:svc:us-east-1:s3', '--user', user, '-T', f, `${s.url}/test/curl/up%20load.txt`]);
    t.equal(put.stdout, '200');
    const get = await exec('curl', ['-sS', '--aws-sigv4', 'svc:svc:us-east-1:s3', '--user', user, `${s.url}/test/curl/up%20load.txt`]);
    t.equal(get.stdout, 'uploaded by curl\n');
    const list = await exec('curl', ['-sS', '--aws-sigv4', 'svc:svc:us-east-1:s3', '--user', user, `${s.url}/test?list-type=2&prefix=curl/`]);
    t.match(list.stdout, /<Key>curl\/up load.txt<\/Key>/);
    const awsGet = await exec('curl', ['-sS', '--aws-sigv4', 'aws:amz:us-east-1:s3', '--user', user, `${s.url}/test/curl/up%20load.txt`]);
    t.equal(awsGet.stdout, 'uploaded by curl\n', 'and the aws dialect');
    const bad = await exec('curl', ['-sS', '--aws-sigv4', 'svc:svc:us-east-1:s3', '--user', `${ADMIN.accessKeyId}:${'f'.repeat(64)}`, `${s.url}/test/curl/up%20load.txt`]);
    t.match(bad.stdout, /SignatureDoesNotMatch/);
  });

  for (const dialect of [SVC, AWS]) {
    t.test(`pre-signed URLs (${dialect.name} dialect)`, async (t) => {
      const p = dialect.paramPrefix;
      const mk = (method: string, key: string, expires: number, now?: Date, withSha = false) => {
        const { url, path: pth } = urlFor(s, `/test/${key}`);
        return presignedUrlString({ dialect, credentials: ADMIN, region: 'us-east-1', method, url, path: pth, expiresSeconds: expires, now, withContentSha256: withSha });
      };
      const get = await fetchUrl(mk('GET', 'private.txt', 60));
      t.equal(get.status, 200);
      t.equal(get.text, 'secret stuff');
      const put = await fetchUrl(mk('PUT', `presigned ${dialect.name}.txt`, 60, undefined, true), 'PUT', 'via presigned put');
      t.equal(put.status, 200, 'pre-signed PUT');
      t.equal((await admin.getBuffer('test', `presigned ${dialect.name}.txt`)).toString(), 'via presigned put');
      const expired = await fetchUrl(mk('GET', 'private.txt', 1, new Date(Date.now() - 5000)));
      t.equal(expired.status, 403);
      t.equal(expired.code, 'AccessDenied', 'expired');
      const future = await fetchUrl(mk('GET', 'private.txt', 60, new Date(Date.now() + 20 * 60e3)));
      t.equal(future.status, 403);
      t.equal(future.code, 'RequestTimeTooSkewed', 'dated more than 15 minutes ahead');
      const good = mk('GET', 'private.txt', 60);
      const tamperedSig = good.replace(new RegExp(`(${p}Signature=)([0-9a-f])`), (_m, a, c) => a + (c === '0' ? '1' : '0'));
      t.equal((await fetchUrl(tamperedSig)).code, 'SignatureDoesNotMatch', 'tampered signature');
      t.equal((await fetchUrl(good.replace('private.txt', 'public.txt'))).code, 'SignatureDoesNotMatch', 'tampered key');
      t.equal((await fetchUrl(good.replace(`${p}Expires=60`, `${p}Expires=6000`))).code, 'SignatureDoesNotMatch', 'tampered expiry');
      t.equal((await fetchUrl(good, 'DELETE')).code, 'SignatureDoesNotMatch', 'another method');
      const tooLong = await fetchUrl(good.replace(`${p}Expires=60`, `${p}Expires=604801`));
      t.equal(tooLong.status, 400);
      t.equal(tooLong.code, 'AuthorizationQueryParametersError');
      const extraHeader = await fetchUrl(good, 'GET', undefined, { [`${dialect.headerPrefix}meta-x`]: 'unsigned' });
      t.equal(extraHeader.code, 'AccessDenied', 'an unsigned x- header is refused');
    });
  }

  t.test('v2 signatures (header and query)', async (t) => {
    const v2 = s.client({ signature: 'v2' });
    await v2.put('test', 'v2/obj.txt', 'signed with v2', { meta: { k: 'v' } });
    t.equal((await v2.getBuffer('test', 'v2/obj.txt')).toString(), 'signed with v2');
    const v2aws = s.client({ signature: 'v2', dialect: AWS });
    t.equal((await v2aws.getBuffer('test', 'v2/obj.txt')).toString(), 'signed with v2');
    const bad = s.client({ signature: 'v2', creds: { ...ADMIN, secretAccessKey: 'd'.repeat(64) } });
    await t.rejects(bad.getBuffer('test', 'v2/obj.txt'), { code: 'SignatureDoesNotMatch' });
    const expires = String(Math.floor(Date.now() / 1000) + 60);
    const pth = encodePath('/test/v2/obj.txt');
    const sig = v2Signature(ADMIN.secretAccessKey, v2StringToSign({ dialect: AWS, method: 'GET', path: pth, query: [], headers: {}, dateOrExpires: expires }));
    const q = `AWSAccessKeyId=${ADMIN.accessKeyId}&Expires=${expires}&Signature=${encodeURIComponent(sig)}`;
    const r = await fetchUrl(`${s.url}${pth}?${q}`);
    t.equal(r.text, 'signed with v2', 'v2 pre-signed');
    const old = String(Math.floor(Date.now() / 1000) - 10);
    const sig2 = v2Signature(ADMIN.secretAccessKey, v2StringToSign({ dialect: AWS, method: 'GET', path: pth, query: [], headers: {}, dateOrExpires: old }));
    t.equal((await fetchUrl(`${s.url}${pth}?AWSAccessKeyId=${ADMIN.accessKeyId}&Expires=${old}&Signature=${encodeURIComponent(sig2)}`)).code, 'AccessDenied', 'v2 expired');
  });
});
