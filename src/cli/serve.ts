// `svcfs serve`: the embedded object server as a command.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Log } from './log';
import { SvcServer } from '../server/server';
import { bucketsFile, loadBuckets, saveBuckets } from '../server/admin';
import { generateUser, User, Users } from '../server/users';
import { UsageError } from './config';

export interface ServeCliOptions {
  data: string;
  host: string;
  port: number;
  region: string;
  bucket: string[];
  users?: string;
  xmlNamespace?: string;
  /** [HOST:]PORT for /-/metrics and /-/health */
  metrics?: string;
  tlsCert?: string;
  tlsKey?: string;
}

/** --tls-cert and --tls-key, both or neither, read now so that a wrong path fails at start. */
function loadTls(o: ServeCliOptions): { cert: Buffer; key: Buffer } | undefined {
  if (!o.tlsCert && !o.tlsKey) return undefined;
  if (!o.tlsCert || !o.tlsKey) throw new UsageError('HTTPS needs both --tls-cert and --tls-key');
  const read = (f: string, what: string) => {
    try {
      return fs.readFileSync(f);
    } catch (e) {
      throw new UsageError(`cannot read the ${what} ${f}: ${(e as Error).message}`);
    }
  };
  return { cert: read(o.tlsCert, 'certificate'), key: read(o.tlsKey, 'key') };
}

/** `9100`, `0.0.0.0:9100` or `[::1]:9100` (the host defaults to 127.0.0.1). */
export function parseListen(v: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]:|([^:]+):)?(\d{1,5})$/.exec(v);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new UsageError(`--metrics wants [HOST:]PORT, got "${v}"`);
  return { host: m[1] ?? m[2] ?? '127.0.0.1', port };
}

/**
 * Users and buckets are changed by `svcfs serve user|bucket ...` while the
 * server runs: reload each file when it changes (a bad file is logged and the
 * previous contents stay in force).
 */
function watchAdminFiles(o: ServeCliOptions, server: SvcServer, log: Log): void {
  const usersFile = o.users ?? path.join(o.data, 'users.json');
  const watch = (file: string, what: string, apply: () => number) => {
    fs.watchFile(file, { interval: 500 }, (cur, prev) => {
      if (cur.mtimeMs === prev.mtimeMs && cur.ino === prev.ino) return;
      try {
        log.info({ file, [what]: apply() }, `reloaded ${what}`);
      } catch (e) {
        log.error({ file, err: (e as Error).message }, `${file} is not valid; the previous ${what} stay in force`);
      }
    }).unref();
  };
  watch(usersFile, 'users', () => {
    const users = Users.load(usersFile);
    server.setUsers(users);
    return users.all().length;
  });
  watch(bucketsFile(o.data), 'buckets', () => {
    const b = loadBuckets(o.data);
    server.setBuckets(b);
    return b.length;
  });
}

/** Users: the given file, else `<data>/users.json`; the environment's keys become the first user. */
export function loadServerUsers(o: ServeCliOptions, out: (s: string) => void): Users {
  const file = o.users ?? path.join(o.data, 'users.json');
  const ak = process.env.SVC_ACCESS_KEY_ID;
  const sk = process.env.SVC_SECRET_ACCESS_KEY;
  const users = fs.existsSync(file) ? Users.load(file) : new Users();
  if (ak && sk) {
    const env: User = { name: 'env', accessKeyId: ak, secretAccessKey: sk, read: ['*'], write: ['*'] };
    const known = users.get(ak);
    if (!known || known.secretAccessKey !== sk) {
      users.add(env);
      users.save(file);
    }
  } else if (users.all().length === 0) {
    const u = generateUser();
    users.add(u);
    users.save(file);
    out(`created user "${u.name}" (kept in ${file}):\n  SVC_ACCESS_KEY_ID=${u.accessKeyId}\n  SVC_SECRET_ACCESS_KEY=${u.secretAccessKey}\n`);
  }
  return users;
}

export async function serve(o: ServeCliOptions, log: Log): Promise<SvcServer> {
  fs.mkdirSync(o.data, { recursive: true, mode: 0o700 });
  // --bucket names join the buckets kept in the data directory (svcfs serve bucket add|list|remove)
  const buckets = [...new Set([...loadBuckets(o.data), ...o.bucket])];
  if (buckets.length === 0) throw new UsageError(`serve needs a bucket: --bucket NAME, or svcfs serve bucket add NAME --data ${o.data}`);
  if (o.bucket.some((b) => !loadBuckets(o.data).includes(b))) saveBuckets(o.data, buckets);
  const users = loadServerUsers(o, (s) => process.stdout.write(s));
  const server = new SvcServer({
    dataDir: o.data, host: o.host, port: o.port, region: o.region, buckets, users, logger: log,
    xmlNamespace: o.xmlNamespace, metrics: o.metrics ? parseListen(o.metrics) : undefined, tls: loadTls(o),
  });
  const url = await server.listen();
  process.stdout.write(`listening on ${url}\n`);
  watchAdminFiles(o, server, log);
  if (server.metricsUrl) process.stdout.write(`metrics on ${server.metricsUrl}/-/metrics, health on ${server.metricsUrl}/-/health\n`);
  let stopping = false;
  const stop = (sig: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ sig }, 'shutting down');
    server.close().then(() => process.exit(0), () => process.exit(1));
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  return server;
}
