// `svcfs serve`: the embedded object server. Parses each request, authenticates
// it and routes it to the operation; answers every refusal with S3's XML error.
import * as http from 'node:http';
import * as https from 'node:https';
import type { Log } from '../cli/log';
import { SvcError } from '../wire/errors';
import { utf8FromLatin1 } from '../wire/headertext';
import { DEFAULT_XML_NAMESPACE } from '../wire/xml';
import { Authenticator, dialectOfHeaders } from './auth';
import { bucketLocation, deleteObjects, headBucket, listBuckets, listObjects } from './bucket';
import { Ctx, sendError, ServerConfig } from './context';
import { abortUpload, completeUpload, createUpload, listParts, listUploads, uploadPart } from './multipart';
import { deleteObject, deleteTagging, getObject, getTagging, putObject, putTagging } from './objects';
import { Metrics, metricsServer } from './metrics';
import { Store } from './store';
import { Users } from './users';

export interface ServeOptions {
  dataDir: string;
  host?: string;
  port?: number;
  region?: string;
  buckets: string[];
  users: Users;
  logger: Log;
  xmlNamespace?: string;
  minPartSize?: number;
  maxPutSize?: number;
  /** where to serve /-/metrics and /-/health (off when absent) */
  metrics?: { host: string; port: number };
  /** serve HTTPS with this certificate chain and key (PEM) */
  tls?: { cert: Buffer; key: Buffer };
}

const MiB = 1024 * 1024;

/** Bucket names as S3 allows them: 3-63 of lower-case letters, digits, dots and hyphens. */
export function validBucketName(b: string): boolean {
  return /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(b) && !b.includes('..');
}

function splitQuery(raw: string): Array<[string, string]> {
  if (!raw) return [];
  return raw.split('&').filter(Boolean).map((p) => {
    const at = p.indexOf('=');
    const k = at < 0 ? p : p.slice(0, at);
    const v = at < 0 ? '' : p.slice(at + 1);
    const dec = (s: string) => decodeURIComponent(s.replace(/\+/g, ' '));
    return [dec(k), dec(v)];
  });
}

export class SvcServer {
  readonly store: Store;
  readonly cfg: ServerConfig;
  private readonly auth: Authenticator;
  private readonly http: http.Server;
  readonly metrics: Metrics;
  private metricsHttp?: http.Server;
  private readonly socketBytes = new WeakMap<import('node:net').Socket, { read: number; written: number }>();
  /** where /-/metrics and /-/health are served, when asked for */
  metricsUrl?: string;
  private readonly log: Log;
  private seq = 0;
  private readonly idBase = BigInt(Date.now()) * 1000000n;
  private inflight = 0;
  url = '';

  constructor(private readonly opts: ServeOptions) {
    for (const b of opts.buckets) if (!validBucketName(b)) throw new Error(`invalid bucket name "${b}"`);
    this.log = opts.logger;
    this.store = new Store(opts.dataDir);
    const swept = this.store.sweep();
    if (swept) this.log.info({ swept }, 'removed unreferenced temporary files and blobs');
    this.cfg = {
      region: opts.region ?? 'us-east-1',
      xmlNamespace: opts.xmlNamespace ?? DEFAULT_XML_NAMESPACE,
      buckets: new Set(opts.buckets),
      minPartSize: opts.minPartSize ?? 5 * MiB,
      maxPutSize: opts.maxPutSize ?? 5 * 1024 * MiB,
      maxKeyBytes: 1024,
      maxBatchKeys: 1000,
      maxTags: 10,
      maxMetaBytes: 2048,
    };
    this.auth = new Authenticator(opts.users);
    this.metrics = new Metrics();
    const serverOpts = { keepAlive: true, requestTimeout: 0, headersTimeout: 60_000, keepAliveTimeout: 65_000 };
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => void this.handle(req, res);
    this.http = opts.tls ? https.createServer({ ...serverOpts, cert: opts.tls.cert, key: opts.tls.key }, handler) : http.createServer(serverOpts, handler);
    // Node answers 417 to an Expect other than 100-continue unless told otherwise; S3 ignores it.
    this.http.on('checkExpectation', (req, res) => void this.handle(req, res));
  }

  async listen(): Promise<string> {
    const host = this.opts.host ?? '127.0.0.1';
    this.url = await listenOn(this.http, host, this.opts.port ?? 9000, this.opts.tls ? 'https' : 'http');
    if (this.opts.metrics) {
      this.metricsHttp = metricsServer(this.metrics, () => this.healthy());
      this.metricsUrl = await listenOn(this.metricsHttp, this.opts.metrics.host, this.opts.metrics.port);
    }
    return this.url;
  }

  /** Users and buckets changed on disk (svcfs serve user/bucket ...): serve them from now on. */
  setUsers(users: Users): void {
    this.auth.setUsers(users);
  }

  setBuckets(buckets: string[]): void {
    for (const b of buckets) if (!validBucketName(b)) throw new Error(`invalid bucket name "${b}"`);
    this.cfg.buckets.clear();
    for (const b of buckets) this.cfg.buckets.add(b);
  }

  /** The index answers a query: the server can serve. */
  healthy(): boolean {
    try {
      this.store.db.prepare('SELECT 1').get();
      return true;
    } catch {
      return false;
    }
  }

  /** Stop accepting, let in-flight requests finish (up to `graceMs`), then close the index. */
  async close(graceMs = 10_000): Promise<void> {
    this.metricsHttp?.close();
    const closed = new Promise<void>((ok) => this.http.close(() => ok()));
    this.http.closeIdleConnections();
    const deadline = Date.now() + graceMs;
    while (this.inflight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    this.http.closeAllConnections();
    await closed;
    this.store.close();
  }

  private nextId(): string {
    return (this.idBase + BigInt(++this.seq)).toString();
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const started = process.hrtime.bigint();
    if (req.url === '/-/health' && req.method === 'GET') {
      // for load balancers and orchestrators: no signature needed, nothing about the data told
      const ok = this.healthy();
      res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ status: ok ? 'ok' : 'unavailable' }) + '\n');
      return;
    }
    const requestId = this.nextId();
    this.inflight++;
    res.once('close', () => {
      // a keep-alive connection carries one request at a time: its bytes since the previous answer are this request's
      const sock = req.socket;
      const last = this.socketBytes.get(sock) ?? { read: 0, written: 0 };
      const now = { read: sock.bytesRead, written: sock.bytesWritten };
      this.socketBytes.set(sock, now);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      this.metrics.observe(ctx.op, req, res.statusCode, seconds, now.read - last.read, now.written - last.written);
    });
    // raw UTF-8 in header values (as Go and Java SDKs and curl send metadata): back to the text that was signed
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') req.headers[k] = utf8FromLatin1(v);
    const rawUrl = req.url ?? '/';
    const qAt = rawUrl.indexOf('?');
    const rawPath = qAt < 0 ? rawUrl : rawUrl.slice(0, qAt);
    const ctx: Ctx = {
      req, res, requestId, log: this.log, store: this.store, cfg: this.cfg, dialect: dialectOfHeaders(req.headers),
      auth: undefined as never, bucket: '', key: '', query: new Map(), bodyDone: false,
    };
    try {
      let decodedPath: string;
      let query: Array<[string, string]>;
      try {
        decodedPath = decodeURIComponent(rawPath);
        query = splitQuery(qAt < 0 ? '' : rawUrl.slice(qAt + 1));
      } catch {
        throw new SvcError('InvalidURI', 'Could not parse the specified URI.');
      }
      const slash = decodedPath.indexOf('/', 1);
      ctx.bucket = slash < 0 ? decodedPath.slice(1) : decodedPath.slice(1, slash);
      ctx.key = slash < 0 ? '' : decodedPath.slice(slash + 1);
      ctx.query = new Map(query);
      const rawQuery = qAt < 0 ? '' : rawUrl.slice(qAt + 1);
      ctx.auth = this.auth.begin({ method: req.method ?? 'GET', rawPath, decodedPath, query, rawQuery, headers: req.headers, now: Date.now() });
      ctx.dialect = ctx.auth.dialect;
      const [op, run] = this.dispatch(ctx);
      ctx.op = op;
      await run();
    } catch (e) {
      const err = e instanceof SvcError ? e : new SvcError('InternalError', 'We encountered an internal error. Please try again.');
      if (!(e instanceof SvcError)) this.log.error({ err: e, requestId }, 'internal error');
      sendError(ctx, err);
      if (!ctx.bodyDone) req.resume();
    } finally {
      this.inflight--;
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      this.log.info({ requestId, method: req.method, bucket: ctx.bucket, key: ctx.key, sub: [...ctx.query.keys()].filter((k) => !/signature|credential/i.test(k)).join(',') || undefined, status: res.statusCode, ms: Math.round(ms * 10) / 10 }, 'request');
    }
  }

  /** Which operation a request is, and the handler that serves it (the name labels metrics). */
  private dispatch(ctx: Ctx): [string, () => void | Promise<void>] {
    const m = ctx.req.method;
    const q = ctx.query;
    if (ctx.bucket === '') {
      if (m === 'GET') return ['ListBuckets', () => listBuckets(ctx)];
      throw new SvcError('MethodNotAllowed', 'The specified method is not allowed against this resource.');
    }
    if (!this.cfg.buckets.has(ctx.bucket)) {
      if (m === 'PUT' && ctx.key === '') throw new SvcError('NotImplemented', 'Creating buckets is not supported: buckets exist before use.');
      throw new SvcError('NoSuchBucket', 'The specified bucket does not exist');
    }
    if (ctx.key === '') {
      switch (m) {
        case 'GET':
          if (q.has('location')) return ['GetBucketLocation', () => bucketLocation(ctx)];
          if (q.has('uploads')) return ['ListMultipartUploads', () => listUploads(ctx)];
          for (const sub of ['versioning', 'acl', 'policy', 'lifecycle', 'cors', 'tagging', 'versions', 'website', 'logging', 'notification', 'encryption']) {
            if (q.has(sub)) throw new SvcError('NotImplemented', `?${sub} is not implemented`);
          }
          return ['ListObjects', () => listObjects(ctx)];
        case 'HEAD':
          return ['HeadBucket', () => headBucket(ctx)];
        case 'POST':
          if (q.has('delete')) return ['DeleteObjects', () => deleteObjects(ctx)];
          break;
        case 'PUT':
          throw new SvcError('BucketAlreadyOwnedByYou', 'Your previous request to create the named bucket succeeded and you already own it.');
        case 'DELETE':
          throw new SvcError('NotImplemented', 'Deleting buckets is not supported.');
      }
      throw new SvcError('MethodNotAllowed', 'The specified method is not allowed against this resource.');
    }
    switch (m) {
      case 'GET':
        if (q.has('tagging')) return ['GetObjectTagging', () => getTagging(ctx)];
        if (q.has('uploadId')) return ['ListParts', () => listParts(ctx)];
        if (q.has('acl')) throw new SvcError('NotImplemented', 'ACL management is not implemented');
        return ['GetObject', () => getObject(ctx, false)];
      case 'HEAD':
        return ['HeadObject', () => getObject(ctx, true)];
      case 'PUT':
        if (q.has('tagging')) return ['PutObjectTagging', () => putTagging(ctx)];
        if (q.has('uploadId') || q.has('partNumber')) return ['UploadPart', () => uploadPart(ctx)];
        if (q.has('acl')) throw new SvcError('NotImplemented', 'ACL management is not implemented');
        return ['PutObject', () => putObject(ctx)];
      case 'DELETE':
        if (q.has('tagging')) return ['DeleteObjectTagging', () => deleteTagging(ctx)];
        if (q.has('uploadId')) return ['AbortMultipartUpload', () => abortUpload(ctx)];
        return ['DeleteObject', () => deleteObject(ctx)];
      case 'POST':
        if (q.has('uploads')) return ['CreateMultipartUpload', () => createUpload(ctx)];
        if (q.has('uploadId')) return ['CompleteMultipartUpload', () => completeUpload(ctx)];
        break;
    }
    throw new SvcError('MethodNotAllowed', 'The specified method is not allowed against this resource.');
  }
}

/** Listen and answer with the URL (a port 0 becomes the one chosen). */
async function listenOn(server: http.Server, host: string, port: number, scheme = 'http'): Promise<string> {
  await new Promise<void>((ok, ko) => {
    server.once('error', ko);
    server.listen(port, host, () => ok());
  });
  const a = server.address() as import('node:net').AddressInfo;
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${a.port}`;
}
