// The stores the mount suites run on: a real `svcfs serve`, and a real Ceph
// cluster's RADOS Gateway (scripts/ceph.sh), the store people move to when they
// outgrow one machine. One suite, two backends: each test asks for a fresh
// bucket on each.
//
// RGW: scripts/test.sh boots one cluster for the whole run and passes it in
// SVCFS_TEST_RGW (URL) with SVCFS_TEST_RGW_KEY / SVCFS_TEST_RGW_SECRET; a test
// file run alone boots its own. SVCFS_TEST_BACKENDS=serve (or rgw) narrows the list.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { SvcClient } from '../../src/wire/client';
import { AWS, SVC } from '../../src/wire/dialect';
import { ADMIN, ROOT, startServer, TestServer, tmpDir } from './server';

export type BackendName = 'serve' | 'rgw';

export interface Backend {
  name: BackendName;
  url: string;
  bucket: string;
  creds: { accessKeyId: string; secretAccessKey: string };
  /** extra `svcfs mount` arguments (the dialect) */
  mountArgs: string[];
  client(): SvcClient;
  /** the svcfs server, on the serve backend */
  server?: TestServer;
}

interface Tap {
  teardown(fn: () => unknown): void;
}

export function backendNames(): BackendName[] {
  const only = process.env.SVCFS_TEST_BACKENDS;
  if (only) return only.split(',').map((s) => s.trim()) as BackendName[];
  return ['serve', 'rgw'];
}

let rgw: { url: string; key: string; secret: string } | undefined;

/** The RGW of this run: the one scripts/test.sh started, or one of our own for this process. */
function rgwCluster(t: Tap): { url: string; key: string; secret: string } {
  if (process.env.SVCFS_TEST_RGW) {
    return { url: process.env.SVCFS_TEST_RGW, key: process.env.SVCFS_TEST_RGW_KEY!, secret: process.env.SVCFS_TEST_RGW_SECRET! };
  }
  if (!rgw) {
    const dir = tmpDir('ceph');
    const port = 17480 + (process.pid % 1000);
    const key = 'RGWTESTKEY' + randomBytes(5).toString('hex').toUpperCase();
    const secret = randomBytes(20).toString('hex');
    const out = execFileSync('bash', [path.join(ROOT, 'scripts', 'ceph.sh'), 'start', dir, '--port', String(port), '--access-key', key, '--secret', secret], { encoding: 'utf8', timeout: 180_000 });
    if (!/rgw ready on (\S+)/.test(out)) throw new Error(`ceph.sh: ${out}`);
    rgw = { url: `http://127.0.0.1:${port}`, key, secret };
    t.teardown(() => {
      execFileSync('bash', [path.join(ROOT, 'scripts', 'ceph.sh'), 'stop', dir], { timeout: 60_000 });
      fs.rmSync(dir, { recursive: true, force: true });
    });
  }
  return rgw;
}

export async function startBackend(t: Tap, name: BackendName): Promise<Backend> {
  if (name === 'serve') {
    const s = await startServer(t);
    return { name, url: s.url, bucket: 'test', creds: ADMIN, mountArgs: [], client: () => s.client(), server: s };
  }
  const r = rgwCluster(t);
  const creds = { accessKeyId: r.key, secretAccessKey: r.secret };
  const clients: SvcClient[] = [];
  const client = () => {
    const c = new SvcClient({ endpoint: r.url, credentials: creds, dialect: AWS, maxAttempts: 3 });
    clients.push(c);
    return c;
  };
  const bucket = `t-${randomBytes(6).toString('hex')}`;
  const admin = client();
  // a bucket from any S3 client: PUT /bucket
  const res = await admin.send({ op: 'createBucket', method: 'PUT', bucket, idempotent: true });
  await res.body.dump();
  t.teardown(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
  });
  return { name, url: r.url, bucket, creds, mountArgs: ['--dialect', 'aws'], client };
}

export { SVC, AWS };
