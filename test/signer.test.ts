// The signer against AWS's published SigV4 examples for S3, against
// @smithy/signature-v4 on generated requests, and the svc dialect's constants.
import t from 'tap';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import { HttpRequest } from '@smithy/protocol-http';
import { Sha256 } from '@aws-crypto/sha256-js';
import { AWS, SVC } from '../src/wire/dialect';
import {
  canonicalRequest, encodePath, presignUrl, queryPairs, signatureOf, signingKey, signRequest, stringToSign, uriEncode,
} from '../src/wire/signer';

const SK = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const AK = 'AKIAIOSFODNN7EXAMPLE';
const TS = '20130524T000000Z';
const SCOPE = '20130524/us-east-1/s3/aws4_request';
const E = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const HOST = 'examplebucket.s3.amazonaws.com';

function sig(method: string, uri: string, query: Array<[string, string]>, headers: Record<string, string>, ph: string): string {
  const signed = Object.keys(headers).sort();
  const creq = canonicalRequest({ method, canonicalUri: uri, query, headers, signedHeaders: signed, payloadHash: ph });
  return signatureOf(signingKey(AWS, SK, '20130524', 'us-east-1'), stringToSign(AWS, TS, SCOPE, creq));
}

t.test('AWS published examples (aws dialect)', async (t) => {
  t.equal(sig('GET', '/test.txt', [], { host: HOST, range: 'bytes=0-9', 'x-amz-content-sha256': E, 'x-amz-date': TS }, E),
    'f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41', 'GET object with Range');
  const ph = '44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072';
  t.equal(sig('PUT', encodePath('/test$file.text'), [], {
    date: 'Fri, 24 May 2013 00:00:00 GMT', host: HOST, 'x-amz-content-sha256': ph, 'x-amz-date': TS, 'x-amz-storage-class': 'REDUCED_REDUNDANCY',
  }, ph), '98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd', 'PUT object');
  t.equal(sig('GET', '/', [['lifecycle', '']], { host: HOST, 'x-amz-content-sha256': E, 'x-amz-date': TS }, E),
    'fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543', 'GET ?lifecycle');
  t.equal(sig('GET', '/', [['max-keys', '2'], ['prefix', 'J']], { host: HOST, 'x-amz-content-sha256': E, 'x-amz-date': TS }, E),
    '34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7', 'GET bucket listing');
  const u = presignUrl({ dialect: AWS, credentials: { accessKeyId: AK, secretAccessKey: SK }, region: 'us-east-1', method: 'GET',
    url: new URL(`https://${HOST}/test.txt`), expiresSeconds: 86400, now: new Date(Date.UTC(2013, 4, 24)) });
  t.equal(u.searchParams.get('X-Amz-Signature'), 'aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404', 'pre-signed GET');
  t.equal(u.searchParams.get('X-Amz-Credential'), `${AK}/${SCOPE}`);
});

t.test('svc dialect differs only by its constants', async (t) => {
  const k = (d: string) => createHmac('sha256', d).update('20130524').digest();
  const chain = ['us-east-1', 's3', 'svc4_request'].reduce((key, part) => createHmac('sha256', key).update(part).digest(), k('SVC4' + SK));
  t.same(signingKey(SVC, SK, '20130524', 'us-east-1'), chain, 'signing key chain starts from SVC4 and ends with svc4_request');
  const url = new URL(`https://${HOST}/test.txt`);
  const h = signRequest({ dialect: SVC, credentials: { accessKeyId: AK, secretAccessKey: SK }, region: 'us-east-1', method: 'GET', url,
    headers: { range: 'bytes=0-9' }, payloadHash: E, now: new Date(Date.UTC(2013, 4, 24)) });
  t.match(h.authorization, /^SVC4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE\/20130524\/us-east-1\/s3\/svc4_request, SignedHeaders=host;range;x-svc-content-sha256;x-svc-date, Signature=[0-9a-f]{64}$/);
  t.equal(h['x-svc-date'], TS);
  // Same request with the svc names mapped back to aws ones: the signature must differ only through the constants.
  const creq = canonicalRequest({ method: 'GET', canonicalUri: '/test.txt', query: [], headers: h,
    signedHeaders: ['host', 'range', 'x-svc-content-sha256', 'x-svc-date'], payloadHash: E });
  const expect = signatureOf(chain, ['SVC4-HMAC-SHA256', TS, '20130524/us-east-1/s3/svc4_request', createHash('sha256').update(creq).digest('hex')].join('\n'));
  t.equal(h.authorization.split('Signature=')[1], expect);
  const p = presignUrl({ dialect: SVC, credentials: { accessKeyId: AK, secretAccessKey: SK }, region: 'us-east-1', method: 'GET', url,
    expiresSeconds: 60, withContentSha256: true });
  for (const n of ['Algorithm', 'Credential', 'Date', 'Expires', 'SignedHeaders', 'Signature', 'Content-Sha256']) t.ok(p.searchParams.has(`X-Svc-${n}`), `X-Svc-${n}`);
  t.equal(p.searchParams.get('X-Svc-Content-Sha256'), 'UNSIGNED-PAYLOAD');
  t.throws(() => presignUrl({ dialect: SVC, credentials: { accessKeyId: AK, secretAccessKey: SK }, region: 'r', method: 'GET', url, expiresSeconds: 604801 }));
  t.throws(() => presignUrl({ dialect: SVC, credentials: { accessKeyId: AK, secretAccessKey: SK }, region: 'r', method: 'GET', url, expiresSeconds: 0 }));
});

t.test('uriEncode follows S3 rules', async (t) => {
  t.equal(uriEncode('a b+c%d~e_f.g-h/é', false), 'a%20b%2Bc%25d~e_f.g-h/%C3%A9');
  t.equal(uriEncode("!*'()/"), '%21%2A%27%28%29%2F');
});

t.test('agrees with @smithy/signature-v4 on generated requests', async (t) => {
  const chars = [...'abcXYZ019 -_.~!*\'()+%/=&?é漢😀'];
  const pick = (n: number) => Array.from({ length: n }, () => chars[Math.floor(Math.random() * chars.length)]).join('');
  let agreed = 0;
  const N = 300;
  for (let i = 0; i < N; i++) {
    const creds = { accessKeyId: 'AK' + randomBytes(9).toString('hex').toUpperCase(), secretAccessKey: randomBytes(32).toString('hex') };
    const region = ['us-east-1', 'eu-west-3', 'cn-north-1'][i % 3];
    const method = ['GET', 'PUT', 'POST', 'DELETE', 'HEAD'][i % 5];
    const key = pick(1 + (i % 40)).replace(/^\/+/, '') || 'k';
    const path = encodePath(`/bucket/${key}`);
    const query: Record<string, string> = {};
    for (let q = 0; q < i % 4; q++) query[pick(3) || 'q'] = pick(i % 7);
    const url = new URL(`http://127.0.0.1:9000${path}`);
    url.search = Object.entries(query).map(([k, v]) => `${uriEncode(k)}=${uriEncode(v)}`).join('&');
    const headers: Record<string, string> = { 'content-type': 'text/plain', 'x-amz-meta-n': pick(5).replace(/[^\x20-\x7e]/g, 'x') || 'v' };
    const body = pick(i % 50);
    const payloadHash = createHash('sha256').update(body).digest('hex');
    const now = new Date(Date.UTC(2024, i % 12, 1 + (i % 28), i % 24, i % 60, i % 60));
    const mine = signRequest({ dialect: AWS, credentials: creds, region, method, url, path, headers, payloadHash, now });
    const smithy = new SignatureV4({ credentials: creds, region, service: 's3', sha256: Sha256, uriEscapePath: false, applyChecksum: true });
    const req = new HttpRequest({ method, protocol: 'http:', hostname: '127.0.0.1', port: 9000, path, query: Object.fromEntries(queryPairs(url)),
      headers: { host: '127.0.0.1:9000', ...headers, 'x-amz-content-sha256': payloadHash }, body });
    const theirs = await smithy.sign(req, { signingDate: now });
    const sigOf = (a: string) => a.split('Signature=')[1];
    if (sigOf(mine.authorization) === sigOf(theirs.headers.authorization)) agreed++;
    else t.fail(`disagree on ${method} ${path}?${url.search}`);
  }
  t.equal(agreed, N, `${N} generated requests signed alike`);
});
