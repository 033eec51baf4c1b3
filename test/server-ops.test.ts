// Running svcfs serve for others: a health check for load balancers and
// orchestrators, and Prometheus metrics on a listener of their own.
import t from 'tap';
import { ADMIN, startServer } from './helpers/server';
import { sleep } from './helpers/mount';

t.test('health on the service port; metrics and health on --metrics; requests, bytes and latency counted', async (t) => {
  const s = await startServer(t, { extraArgs: ['--metrics', '127.0.0.1:0'] });
  const health = await fetch(`${s.url}/-/health`);
  t.equal(health.status, 200, 'GET /-/health on the service port needs no signature');
  t.same(await health.json(), { status: 'ok' });
  for (let i = 0; i < 20 && !/metrics on/.test(s.stdout); i++) await sleep(50);
  const m = /metrics on (\S+)\/-\/metrics/.exec(s.stdout);
  t.ok(m, `the server says where its metrics are: ${s.stdout.trim()}`);
  if (!m) return;
  const base = m[1];
  t.equal((await fetch(`${base}/-/health`)).status, 200, 'health on the metrics listener too');
  const c = s.client();
  const body = Buffer.alloc(100_000, 7);
  await c.put('test', 'm/one', body);
  await c.getBuffer('test', 'm/one');
  await c.head('test', 'm/missing');
  await c.copy({ bucket: 'test', key: 'm/one' }, 'test', 'm/two');
  const denied = await fetch(`${s.url}/test/m/one`);
  t.equal(denied.status, 403, 'an unsigned GET is refused');
  await sleep(100);
  const res = await fetch(`${base}/-/metrics`);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/, 'the Prometheus text format');
  const text = await res.text();
  t.match(text, /^svcfs_requests_total\{operation="PutObject",status="200"\} 1$/m, 'requests by operation and status');
  t.match(text, /^svcfs_requests_total\{operation="GetObject",status="200"\} 1$/m);
  t.match(text, /^svcfs_requests_total\{operation="HeadObject",status="404"\} 1$/m);
  t.match(text, /^svcfs_requests_total\{operation="CopyObject",status="200"\} 1$/m, 'a copy is named a copy');
  t.match(text, /^svcfs_requests_total\{operation="GetObject",status="403"\} 1$/m, 'refused requests counted with their status');
  const received = Number(/^svcfs_received_bytes_total (\d+)$/m.exec(text)?.[1]);
  const sent = Number(/^svcfs_sent_bytes_total (\d+)$/m.exec(text)?.[1]);
  t.ok(received >= body.length && received < body.length + 20_000, `bytes received include the upload (${received})`);
  t.ok(sent >= body.length && sent < body.length + 20_000, `bytes sent include the download (${sent})`);
  t.match(text, /^svcfs_request_duration_seconds_bucket\{operation="PutObject",le="\+Inf"\} 1$/m, 'a latency histogram per operation');
  t.match(text, /^svcfs_request_duration_seconds_count\{operation="PutObject"\} 1$/m);
  t.notMatch(text, new RegExp(ADMIN.accessKeyId), 'no key in the metrics');
  t.equal((await fetch(`${s.url}/-/metrics`)).status, 404, 'the service port does not serve metrics (NoSuchBucket)');
});

t.test('without --metrics there is no metrics listener, and a bad address is a usage error', async (t) => {
  const s = await startServer(t);
  await sleep(100);
  t.notMatch(s.stdout, /metrics on/, 'metrics are off by default');
  const { spawnSync } = await import('node:child_process');
  const { CLI } = await import('./helpers/server');
  const r = spawnSync(process.execPath, [CLI, 'serve', '--data', '/tmp/none', '--bucket', 'test', '--metrics', 'nonsense:port'], { encoding: 'utf8' });
  t.equal(r.status, 2);
  t.match(r.stderr, /--metrics wants \[HOST:\]PORT/);
});

t.test('HTTPS: serve with --tls-cert/--tls-key; curl, the client and a mount trust it with --ca; without it a clear error', async (t) => {
  const { tmpDir, CLI } = await import('./helpers/server');
  const { sh, shStatus, startMount } = await import('./helpers/mount');
  const fs = await import('node:fs');
  const dir = tmpDir('tls');
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  await sh(`openssl req -x509 -newkey rsa:2048 -nodes -keyout ${dir}/key.pem -out ${dir}/cert.pem -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost 2>/dev/null`);
  const s = await startServer(t, { extraArgs: ['--tls-cert', `${dir}/cert.pem`, '--tls-key', `${dir}/key.pem`] });
  t.match(s.url, /^https:\/\//, 'the server says https');
  const { SvcClient } = await import('../src/wire/client');
  const c = new SvcClient({ endpoint: s.url, credentials: ADMIN, ca: fs.readFileSync(`${dir}/cert.pem`), maxAttempts: 1 });
  t.teardown(() => c.close());
  await c.put('test', 'secure.txt', 'over TLS');
  t.equal((await c.getBuffer('test', 'secure.txt')).toString(), 'over TLS', 'the client with the CA');
  const curl = await sh(`curl -sf --cacert ${dir}/cert.pem --aws-sigv4 svc:svc:us-east-1:s3 --user ${ADMIN.accessKeyId}:${ADMIN.secretAccessKey} ${s.url}/test/secure.txt`);
  t.equal(curl, 'over TLS', 'curl with --cacert');
  const plain = await shStatus(`curl -sf --aws-sigv4 svc:svc:us-east-1:s3 --user ${ADMIN.accessKeyId}:${ADMIN.secretAccessKey} ${s.url}/test/secure.txt`);
  t.not(plain.code, 0, 'curl without the CA refuses the self-signed server');
  const m = await startMount(t, s, { args: ['--ca', `${dir}/cert.pem`] });
  await sh(`echo mounted-over-tls > ${m.mnt}/via-mount.txt`);
  t.equal((await c.getBuffer('test', 'via-mount.txt')).toString(), 'mounted-over-tls\n', 'a mount with --ca writes over HTTPS');
  const mnt2 = tmpDir('tls-mnt');
  const started = Date.now();
  const bad = await shStatus(`SVC_ACCESS_KEY_ID=${ADMIN.accessKeyId} SVC_SECRET_ACCESS_KEY=${ADMIN.secretAccessKey} ${process.execPath} ${CLI} mount test ${mnt2} --endpoint ${s.url} -o cache_dir=${dir}/c2`);
  t.not(bad.code, 0, 'a mount without --ca fails');
  t.ok(Date.now() - started < 20_000, `at once: an untrusted certificate is not retried (${Date.now() - started} ms)`);
  t.match(bad.stderr, /certificate.*--ca FILE/, `and says how to trust the server: ${bad.stderr.trim()}`);
  const half = await shStatus(`${process.execPath} ${CLI} serve --data ${dir}/d2 --bucket test --tls-cert ${dir}/cert.pem`);
  t.equal(half.code, 2, 'a certificate without its key is a usage error');
  t.match(half.stderr, /both --tls-cert and --tls-key/);
});
