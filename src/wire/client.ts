// The HTTP client for every operation of the service (undici, keep-alive pool).
// Signs each request (v4 header form, either dialect, or v2), retries
// idempotent requests on network errors and 5xx with exponential backoff and
// jitter, and turns error bodies into typed SvcErrors.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { Readable } from 'node:stream';
import * as tls from 'node:tls';
import type { Agent as UndiciAgent, Dispatcher } from 'undici';
import { DirectGets, UnsupportedResponse } from './bodyinto';
import { Dialect, SVC, UNSIGNED_PAYLOAD, EMPTY_SHA256 } from './dialect';
import { SvcError } from './errors';
import { decodeHeaderText, encodeHeaderText, utf8FromLatin1 } from './headertext';
import { JSON_LISTING, JsonListing } from './listing';
import { Credentials, encodePath, sha256Hex, signRequest, signRequestV2, uriEncode } from './signer';
import { buildXml, parseXml, textOf } from './xml';

export interface ClientOptions {
  endpoint: string;
  /** PEM certificates to trust for https:// endpoints, besides Node's bundled roots (a private CA, a self-signed server) */
  ca?: string | Buffer;
  credentials?: Credentials;
  region?: string;
  dialect?: Dialect;
  signature?: 'v4' | 'v2';
  /** attempts for an idempotent request, the first included */
  maxAttempts?: number;
  /** total time budget for one request with its retries */
  retryBudgetMs?: number;
  baseDelayMs?: number;
  connections?: number;
  headersTimeoutMs?: number;
  bodyTimeoutMs?: number;
  dispatcher?: Dispatcher;
  /** ranged GETs into a buffer over connections of their own, the body read in place (see bodyinto.ts); default on unless a dispatcher is given */
  directGets?: boolean;
  /** called once per HTTP request sent, with the operation's name */
  onRequest?: (op: string) => void;
  /** called before each retry */
  onRetry?: (op: string, attempt: number, err: unknown) => void;
  /** the store refused a request for its time: requests are signed with the store's clock from now on (clockOffsetMs) */
  onClockOffset?: (offsetMs: number) => void;
  /** how many requests may be in their retry phase at once (no retry storm after an outage) */
  maxConcurrentRetries?: number;
  /**
   * Whether object and part uploads carry their SHA-256 in the signature
   * (the store then refuses bytes changed on the way) or UNSIGNED-PAYLOAD:
   * 'auto' (the default) signs them unless the transport protects them
   * already: TLS (its MAC covers every byte, which is why the AWS SDKs send
   * S3 uploads unsigned over HTTPS) or a loopback address (no wire). Hashing
   * costs both sides: 2 GiB took 1.5 s of the client's CPU and as much of the store's.
   */
  payloadHash?: 'auto' | 'always' | 'never';
}

/** A counting semaphore. */
export class Slots {
  private waiting: Array<() => void> = [];
  constructor(private free: number) {}
  async take(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((r) => this.waiting.push(r));
  }
  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

/** A body that can be sent again on retry. */
export type Body = Buffer | string | { file: string; start: number; length: number };

export interface SendOptions {
  op: string;
  method: string;
  bucket: string;
  key?: string;
  query?: Array<[string, string]>;
  headers?: Record<string, string>;
  body?: Body;
  /** hex SHA-256 of the body when already known */
  sha256?: string;
  /** base64 MD5 to send as Content-MD5 */
  md5?: string;
  idempotent?: boolean;
  /** statuses that are not errors besides 2xx (e.g. 304, 404 for head) */
  accept?: number[];
}

export interface Response {
  status: number;
  headers: Record<string, string>;
  body: Dispatcher.ResponseData['body'];
}

export interface ObjectInfo {
  key: string;
  size: number;
  etag: string; // unquoted
  lastModified: Date;
  contentType?: string;
  meta: Record<string, string>;
  tagCount?: number;
}

export interface ListEntry {
  key: string;
  size: number;
  etag: string;
  lastModified: Date;
  /** user metadata, when the server returns it (svcfs serve does with metadata=true) */
  meta?: Record<string, string>;
}

export interface ListPage {
  contents: ListEntry[];
  prefixes: string[];
  /** metadata of the directory markers of common prefixes, when the server returns it */
  prefixMeta: Map<string, Record<string, string>>;
  truncated: boolean;
  next?: string;
}

export interface ListOptions {
  prefix?: string;
  delimiter?: string;
  startAfter?: string;
  maxKeys?: number;
  /** ask for user metadata in each entry (an extension of svcfs serve; other stores ignore it) */
  metadata?: boolean;
}


export interface PutOptions {
  contentType?: string;
  meta?: Record<string, string>;
  tags?: Record<string, string>;
  publicRead?: boolean;
  ifMatch?: string;
  ifNoneMatch?: string;
  /** send the If-Match ETag without quotes (Ceph RGW 16 compares it unquoted) */
  unquotedIfMatch?: boolean;
  headers?: Record<string, string>;
}

/** An If-Match value: the ETag quoted, as RFC 7232 writes it, unless the store wants it bare. */
function ifMatchValue(etag: string, unquoted?: boolean): string {
  return unquoted ? etag : `"${etag}"`;
}

function bodyLength(b: Body | undefined): number {
  if (b === undefined) return 0;
  if (typeof b === 'string') return Buffer.byteLength(b);
  if (Buffer.isBuffer(b)) return b.length;
  return b.length;
}

function bodyStream(b: Body): Buffer | Readable {
  if (typeof b === 'string') return Buffer.from(b);
  if (Buffer.isBuffer(b)) return b;
  if (b.length === 0) return Buffer.alloc(0);
  return fs.createReadStream(b.file, { start: b.start, end: b.start + b.length - 1, highWaterMark: 1024 * 1024 });
}

/**
 * SHA-256 (hex) of a body, for the signature. Uploads send no Content-MD5: the
 * signed hash already proves the bytes, and MD5 costs more than SHA-256 where
 * the CPU has SHA instructions (727 vs 1707 MiB/s here).
 * Hashed in the event loop: WebCrypto's digest would run in the thread pool,
 * but it first copies the part into fresh memory, and on this VM the page
 * faults of that copy cost 20-30 ms per 8 MiB part, three times the hash itself
 * (6 ms): 0.63 s of the mount's event loop per 256 MiB written, now 0.19 s.
 */
export async function bodySha256(b: Body): Promise<string> {
  const sha = createHash('sha256');
  if (typeof b === 'string' || Buffer.isBuffer(b)) sha.update(b);
  else if (b.length > 0) for await (const c of bodyStream(b) as Readable) sha.update(c);
  return sha.digest('hex');
}

/** A response body that did not fill the range asked for (the connection dropped mid-way): retried. */
export class ShortBodyError extends Error {}

/**
 * One request through undici's dispatcher with a handler of our own: a 2xx
 * body goes into `into` chunk by chunk (what does not fit is counted, not
 * kept), an error body is kept as text for its XML.
 */
function receiveInto(d: Dispatcher, opts: Dispatcher.DispatchOptions, into: Buffer): Promise<{ status: number; headers: Record<string, string>; received: number; text: string }> {
  return new Promise((resolve, reject) => {
    let status = 0;
    let headers: Record<string, string> = {};
    let received = 0;
    let errorBody: Buffer[] | undefined;
    d.dispatch(opts, {
      onConnect: () => undefined,
      onHeaders: (statusCode: number, raw: Buffer[]) => {
        status = statusCode;
        if (statusCode < 200) return true;
        headers = {};
        for (let i = 0; i + 1 < raw.length; i += 2) {
          const k = raw[i]!.toString('latin1').toLowerCase();
          const v = raw[i + 1]!.toString('latin1');
          headers[k] = headers[k] === undefined ? v : `${headers[k]},${v}`;
        }
        if (statusCode >= 300) errorBody = [];
        return true;
      },
      onData: (chunk: Buffer) => {
        if (errorBody) errorBody.push(chunk);
        else {
          if (received < into.length) chunk.copy(into, received, 0, Math.min(chunk.length, into.length - received));
          received += chunk.length;
        }
        return true;
      },
      onComplete: () => resolve({ status, headers, received, text: errorBody ? Buffer.concat(errorBody).toString('utf8') : '' }),
      onError: reject,
    } as unknown as Dispatcher.DispatchHandler);
  });
}

/** 127.0.0.0/8, ::1 or localhost: requests to it never cross a wire. */
export function isLoopback(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h) || /^::ffff:127\./.test(h);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * undici's Agent and the request API of its dispatchers, without the rest of the
 * package (fetch, WebSocket, caches, mocks): loading all of it took 90-120 ms of
 * every mount's start, this a third of that. The whole package if its layout changes.
 */
function loadAgent(): typeof UndiciAgent {
  try {
    const base = require('undici/lib/dispatcher/dispatcher');
    if (typeof base.prototype.request !== 'function') Object.assign(base.prototype, require('undici/lib/api'));
    const agent = require('undici/lib/dispatcher/agent');
    if (typeof agent.prototype.request === 'function') return agent;
  } catch {
    // a different layout: fall through
  }
  return require('undici').Agent;
}

/** A server certificate that is not trusted stays untrusted: asking again only delays the error. */
const CERT_ERRORS = new Set(['DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID', 'CERT_UNTRUSTED', 'CERT_REJECTED', 'ERR_TLS_CERT_ALTNAME_INVALID']);

/**
 * Stores refuse a request signed more than 15 minutes off their clock
 * (RequestTimeTooSkewed): a laptop after a trip, a VM resumed, a board with no
 * RTC. A refusal for the time, or a body-less 403 (a HEAD) from a store whose
 * clock is this far from ours, makes the client sign with the store's time,
 * as the AWS SDKs do; below it, a 403 is only what it says.
 */
const CLOCK_SKEW_MS = 5 * 60 * 1000;

/** marks a refusal that moved the client's clock: the request, refused before it ran, goes once more at once */
const RECLOCKED = Symbol('reclocked');
const reclocked = (e: unknown) => typeof e === 'object' && e !== null && (e as Record<symbol, unknown>)[RECLOCKED] === true;

function isRetryable(e: unknown): boolean {
  if (e instanceof SvcError) return e.status >= 500 || e.code === 'RequestTimeout' || e.code === 'SlowDown';
  const err = e as { code?: string; cause?: { code?: string } } | undefined;
  if (CERT_ERRORS.has(err?.code ?? '') || CERT_ERRORS.has(err?.cause?.code ?? '')) return false;
  return true; // network errors, resets, timeouts
}

function lowerHeaders(h: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(',') : v;
  return out;
}

export class SvcClient {
  readonly dialect: Dialect;
  readonly region: string;
  private readonly base: URL;
  private readonly dispatcher: Dispatcher;
  private readonly ownDispatcher: boolean;
  readonly counts = new Map<string, number>();
  retries = 0;
  /** ms to add to this machine's clock to get the store's (learned from a refusal: see CLOCK_SKEW_MS) */
  clockOffsetMs = 0;
  /** upload bodies go with UNSIGNED-PAYLOAD (see ClientOptions.payloadHash) */
  readonly unsignedUploads: boolean;
  private readonly retrySlots: Slots;
  /** undefined: ranged GETs go through undici (off, or the store's responses do not suit) */
  private direct?: DirectGets;

  constructor(readonly opts: ClientOptions) {
    this.dialect = opts.dialect ?? SVC;
    this.region = opts.region ?? 'us-east-1';
    this.base = new URL(opts.endpoint);
    this.retrySlots = new Slots(opts.maxConcurrentRetries ?? 8);
    this.ownDispatcher = !opts.dispatcher;
    const mode = opts.payloadHash ?? 'auto';
    this.unsignedUploads = opts.signature === 'v2' || mode === 'never' || (mode === 'auto' && (this.base.protocol === 'https:' || isLoopback(this.base.hostname)));
    this.dispatcher = opts.dispatcher ?? new (loadAgent())({
      connections: opts.connections ?? 32,
      keepAliveTimeout: 30_000,
      headersTimeout: opts.headersTimeoutMs ?? 60_000,
      bodyTimeout: opts.bodyTimeoutMs ?? 60_000,
      ...(opts.ca ? { connect: { ca: [...tls.rootCertificates, opts.ca.toString()] } } : {}),
    });
    if ((opts.directGets ?? !opts.dispatcher) && /^https?:$/.test(this.base.protocol)) {
      this.direct = new DirectGets(this.base, { ca: opts.ca, headersTimeoutMs: opts.headersTimeoutMs ?? 60_000, bodyTimeoutMs: opts.bodyTimeoutMs ?? 60_000,
        maxSockets: Math.max(1, Math.floor((opts.connections ?? 32) / 2)) });
    }
  }

  /** Ranged GETs read in place: connections opened and requests sent (undefined: off, or given up for undici). */
  directGets(): { opened: number; sent: number } | undefined {
    return this.direct && { opened: this.direct.opened, sent: this.direct.sent };
  }

  async close(): Promise<void> {
    this.direct?.close();
    if (this.ownDispatcher) await this.dispatcher.close();
  }

  /**
   * Where a request goes: the encoded path (each key segment encoded once,
   * S3-style, `.` and `..` kept as they are) and a URL for origin and query.
   */
  target(bucket: string, key?: string, query: Array<[string, string]> = []): { url: URL; path: string } {
    const path = this.base.pathname.replace(/\/$/, '') + encodePath(`/${bucket}${key !== undefined ? '/' + key : ''}`);
    const url = new URL(this.base.origin);
    url.search = query.map(([k, v]) => (v === '' && ['delete', 'tagging', 'uploads', 'location'].includes(k) ? uriEncode(k) : `${uriEncode(k)}=${uriEncode(v)}`)).join('&');
    return { url, path };
  }

  private h(name: string): string {
    return this.dialect.headerPrefix + name;
  }

  /** Send one request, with retries when idempotent. Throws SvcError for error statuses. */
  send(o: SendOptions): Promise<Response> {
    return this.retrying(o, (attempt) => this.sendOnce(o, attempt));
  }

  /** `once` until it succeeds, fails for good, or the time budget is spent (only once when not idempotent). */
  private async retrying<T>(o: SendOptions, once: (attempt: number) => Promise<T>): Promise<T> {
    const attempts = o.idempotent === false ? 1 : this.opts.maxAttempts ?? 5;
    const budget = Date.now() + (this.opts.retryBudgetMs ?? 60_000);
    const base = this.opts.baseDelayMs ?? 100;
    let holding = false;
    let resent = false;
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          return await once(attempt);
        } catch (e) {
          // (refused at authentication, so it never ran: once more whatever the method, re-signed)
          if (reclocked(e) && !resent) {
            resent = true;
            continue;
          }
          if (attempt >= attempts || !isRetryable(e) || Date.now() >= budget) throw e;
          if (!holding) {
            await this.retrySlots.take();
            holding = true;
          }
          this.retries++;
          this.opts.onRetry?.(o.op, attempt, e);
          // exponential backoff with jitter, within the request's time budget
          const delay = Math.min(base * 2 ** (attempt - 1), 5_000);
          await sleep(Math.min(Math.random() * delay + delay / 2, Math.max(0, budget - Date.now())));
        }
      }
    } finally {
      if (holding) this.retrySlots.give();
    }
  }

  /** What goes on the wire for a request: its origin, path and query, and signed headers. */
  private prepare(o: SendOptions): { url: URL; path: string; signed: Record<string, string>; clock: number } {
    const clock = this.clockOffsetMs;
    const { url, path } = this.target(o.bucket, o.key, o.query);
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    const len = bodyLength(o.body);
    if (o.body !== undefined || o.method === 'PUT' || o.method === 'POST') headers['content-length'] = String(len);
    if (o.md5) headers['content-md5'] = o.md5;
    let signed: Record<string, string> = headers;
    if (this.opts.credentials) {
      if (this.opts.signature === 'v2') {
        signed = signRequestV2({ dialect: this.dialect, method: o.method, url, path, headers, credentials: this.opts.credentials, now: this.now() });
      } else {
        const payloadHash = o.sha256 ?? (o.body === undefined || len === 0 ? EMPTY_SHA256
          : typeof o.body === 'string' || Buffer.isBuffer(o.body) ? sha256Hex(o.body) : UNSIGNED_PAYLOAD);
        signed = signRequest({ dialect: this.dialect, credentials: this.opts.credentials, region: this.region, method: o.method, url, path, headers, payloadHash, now: this.now() });
      }
    }
    this.counts.set(o.op, (this.counts.get(o.op) ?? 0) + 1);
    this.opts.onRequest?.(o.op);
    return { url, path, signed, clock };
  }

  private async sendOnce(o: SendOptions, attempt: number): Promise<Response> {
    const { url, path, signed, clock } = this.prepare(o);
    // Dispatcher.request takes the path as is; undici's request() would resolve dot segments.
    const res = await this.dispatcher.request({
      origin: url.origin,
      path: path + url.search,
      method: o.method as Dispatcher.HttpMethod,
      headers: signed,
      body: o.body === undefined ? undefined : bodyStream(o.body),
      // undici closes the connection after every HEAD (for servers that send a body anyway);
      // S3-style stores do not, and a mount's lookups are HEADs: keep the connection
      reset: false,
    });
    const rh = lowerHeaders(res.headers as Record<string, string | string[]>);
    if ((res.statusCode >= 200 && res.statusCode < 300) || o.accept?.includes(res.statusCode)) {
      return { status: res.statusCode, headers: rh, body: res.body };
    }
    throw this.failure(res.statusCode, await res.body.text().catch(() => ''), rh, attempt, clock);
  }

  /** The time requests are signed with: the local clock, corrected by what a store's refusal taught (clockOffsetMs). */
  private now(): Date {
    return new Date(Date.now() + this.clockOffsetMs);
  }

  /**
   * The error of a refused request: the store's code and message, its request
   * id, and which attempt it was. `clock`: the offset it was signed with.
   */
  private failure(status: number, text: string, headers: Record<string, string>, attempt: number, clock: number): SvcError {
    const err = errorFrom(status, text, headers[this.h('request-id')]);
    (err as SvcError & { attempt?: number }).attempt = attempt;
    if (status === 403 && this.learnClock(err.code === 'RequestTimeTooSkewed', !text, headers.date, clock)) {
      (err as unknown as Record<symbol, boolean>)[RECLOCKED] = true;
    }
    return err;
  }

  /**
   * A 403 that may be about the time: the store's clock from its Date header
   * (1 s precision, plenty against a 15-minute window). True when requests are
   * now signed with another time than this one was, so it is worth sending again.
   */
  private learnClock(tooSkewed: boolean, bodiless: boolean, date: string | undefined, clock: number): boolean {
    const store = date ? Date.parse(date) : NaN;
    if (!Number.isFinite(store)) return false;
    const offset = Math.round((store - Date.now()) / 1000) * 1000;
    // a HEAD's refusal has no code: about the time only when the clocks are that far apart
    if (!tooSkewed && !(bodiless && Math.abs(offset - clock) >= CLOCK_SKEW_MS)) return false;
    // (concurrent refusals: the first one moved the clock, the others find it moved)
    if (Math.abs(offset - this.clockOffsetMs) >= CLOCK_SKEW_MS) {
      this.clockOffsetMs = Math.abs(offset) < CLOCK_SKEW_MS ? 0 : offset;
      this.opts.onClockOffset?.(this.clockOffsetMs);
    }
    return this.clockOffsetMs !== clock;
  }

  /** The payload hash an upload body is signed with (v2 signs no payload: nothing to hash). */
  private uploadHash(body: Body): Promise<string> | string {
    if (this.unsignedUploads && bodyLength(body) > 0) return UNSIGNED_PAYLOAD;
    return bodySha256(body);
  }

  // ---- objects ----

  private info(key: string, h: Record<string, string>): ObjectInfo {
    const meta: Record<string, string> = {};
    const mp = this.h('meta-');
    for (const [k, v] of Object.entries(h)) if (k.startsWith(mp)) meta[k.slice(mp.length)] = decodeHeaderText(utf8FromLatin1(v));
    const tc = h[this.h('tagging-count')];
    return {
      key,
      size: Number(h['content-range']?.split('/')[1] ?? h['content-length'] ?? 0),
      etag: (h.etag ?? '').replace(/^"|"$/g, ''),
      lastModified: new Date(h['last-modified'] ?? 0),
      contentType: h['content-type'],
      meta,
      tagCount: tc === undefined ? undefined : Number(tc),
    };
  }

  /** HEAD; undefined when the key does not exist. */
  async head(bucket: string, key: string, o: { ifNoneMatch?: string } = {}): Promise<ObjectInfo | undefined | 'not-modified'> {
    const headers: Record<string, string> = {};
    if (o.ifNoneMatch) headers['if-none-match'] = `"${o.ifNoneMatch}"`;
    const r = await this.send({ op: 'head', method: 'HEAD', bucket, key, headers, accept: [304, 404] });
    await r.body.dump();
    if (r.status === 404) return undefined;
    if (r.status === 304) return 'not-modified';
    return this.info(key, r.headers);
  }

  /** GET, optionally a byte range [start, end] inclusive; the caller consumes the body. */
  async get(bucket: string, key: string, o: { range?: [number, number]; ifMatch?: string; ifNoneMatch?: string } = {}): Promise<{ info: ObjectInfo; status: number; body: Response['body'] }> {
    const headers: Record<string, string> = {};
    if (o.range) headers.range = `bytes=${o.range[0]}-${o.range[1]}`;
    if (o.ifMatch) headers['if-match'] = `"${o.ifMatch}"`;
    if (o.ifNoneMatch) headers['if-none-match'] = `"${o.ifNoneMatch}"`;
    const r = await this.send({ op: 'get', method: 'GET', bucket, key, headers, accept: [304] });
    return { info: this.info(key, r.headers), status: r.status, body: r.body };
  }

  /**
   * GET of bytes start..end (inclusive) straight into `into`: read there by
   * the socket itself (DirectGets), or through undici with each chunk copied to
   * its place as it comes, with no stream in between (undici's Readable and an
   * async iterator over it were most of the CPU of a cold read). A body
   * shorter or longer than the range is an error (retried like a reset).
   */
  async getRangeInto(bucket: string, key: string, start: number, end: number, into: Buffer, o: { ifMatch?: string } = {}): Promise<void> {
    const headers: Record<string, string> = { range: `bytes=${start}-${end}` };
    if (o.ifMatch) headers['if-match'] = `"${o.ifMatch}"`;
    const so: SendOptions = { op: 'get', method: 'GET', bucket, key, headers };
    const want = end - start + 1;
    await this.retrying(so, async (attempt) => {
      let { url, path, signed, clock } = this.prepare(so);
      const direct = this.direct?.get(path + url.search, signed, into.subarray(0, want));
      let r: { status: number; headers: Record<string, string>; received: number; text: string } | undefined;
      try {
        r = await direct;
      } catch (e) {
        if (!(e instanceof UnsupportedResponse)) throw e;
        // (a store that sends ranges chunked: undici from now on)
        this.direct = undefined;
        ({ url, path, signed, clock } = this.prepare(so));
      }
      r ??= await receiveInto(this.dispatcher, { origin: url.origin, path: path + url.search, method: 'GET', headers: signed, reset: false }, into.subarray(0, want));
      if (r.status < 200 || r.status >= 300) throw this.failure(r.status, r.text, r.headers, attempt, clock);
      if (r.received !== want) throw new ShortBodyError(`${r.received} of ${want} bytes`);
    });
  }

  async getBuffer(bucket: string, key: string, range?: [number, number]): Promise<Buffer> {
    for (let attempt = 1; ; attempt++) {
      const { body } = await this.get(bucket, key, { range });
      try {
        return Buffer.from(await body.arrayBuffer());
      } catch (e) {
        if (attempt >= 3) throw e; // a body cut mid-way: fetch again
      }
    }
  }

  private putHeaders(o: PutOptions): Record<string, string> {
    const h: Record<string, string> = { ...(o.headers ?? {}) };
    if (o.contentType) h['content-type'] = o.contentType;
    for (const [k, v] of Object.entries(o.meta ?? {})) h[this.h('meta-') + k.toLowerCase()] = encodeHeaderText(v);
    if (o.tags && Object.keys(o.tags).length) h[this.h('tagging')] = new URLSearchParams(o.tags).toString();
    if (o.publicRead) h[this.h('acl')] = 'public-read';
    if (o.ifMatch) h['if-match'] = ifMatchValue(o.ifMatch, o.unquotedIfMatch);
    if (o.ifNoneMatch) h['if-none-match'] = o.ifNoneMatch === '*' ? '*' : `"${o.ifNoneMatch}"`;
    return h;
  }

  /** PUT an object (Content-MD5 and signed SHA-256); returns its ETag. */
  async put(bucket: string, key: string, body: Body, o: PutOptions = {}): Promise<string> {
    const r = await this.send({ op: 'put', method: 'PUT', bucket, key, body, sha256: await this.uploadHash(body), headers: this.putHeaders(o) });
    await r.body.dump();
    return (r.headers.etag ?? '').replace(/^"|"$/g, '');
  }

  async copy(src: { bucket: string; key: string }, bucket: string, key: string,
    o: PutOptions & { replaceMetadata?: boolean; replaceTags?: boolean; ifSourceMatch?: string } = {}): Promise<string> {
    const h = this.putHeaders(o);
    h[this.h('copy-source')] = encodePath(`/${src.bucket}/${src.key}`);
    if (o.replaceMetadata) h[this.h('metadata-directive')] = 'REPLACE';
    if (o.replaceTags) h[this.h('tagging-directive')] = 'REPLACE';
    if (o.ifSourceMatch) h[this.h('copy-source-if-match')] = `"${o.ifSourceMatch}"`;
    const r = await this.send({ op: 'copy', method: 'PUT', bucket, key, headers: h });
    const doc = parseXml(await r.body.text());
    return textOf(doc.CopyObjectResult?.ETag).replace(/^"|"$/g, '');
  }

  async delete(bucket: string, key: string): Promise<void> {
    const r = await this.send({ op: 'delete', method: 'DELETE', bucket, key });
    await r.body.dump();
  }

  /** Batch delete in chunks of 1000; returns the keys that failed, with their codes. */
  async deleteMany(bucket: string, keys: string[], quiet = true): Promise<{ deleted: string[]; errors: Array<{ key: string; code: string; message: string }> }> {
    const out = { deleted: [] as string[], errors: [] as Array<{ key: string; code: string; message: string }> };
    for (let i = 0; i < keys.length; i += 1000) {
      const xml = buildXml('Delete', { Quiet: quiet, Object: keys.slice(i, i + 1000).map((Key) => ({ Key })) });
      const body = Buffer.from(xml);
      const md5 = createHash('md5').update(body).digest('base64');
      const r = await this.send({ op: 'deleteMany', method: 'POST', bucket, query: [['delete', '']], body, md5, headers: { 'content-type': 'application/xml' } });
      const doc = parseXml(await r.body.text()).DeleteResult ?? {};
      for (const d of doc.Deleted ?? []) out.deleted.push(textOf(d.Key));
      for (const e of doc.Error ?? []) out.errors.push({ key: textOf(e.Key), code: textOf(e.Code), message: textOf(e.Message) });
    }
    return out;
  }

  // ---- tagging ----

  async getTags(bucket: string, key: string): Promise<Record<string, string>> {
    const r = await this.send({ op: 'getTags', method: 'GET', bucket, key, query: [['tagging', '']] });
    const doc = parseXml(await r.body.text());
    const out: Record<string, string> = {};
    for (const t of doc.Tagging?.TagSet?.Tag ?? []) out[textOf(t.Key)] = textOf(t.Value);
    return out;
  }

  async putTags(bucket: string, key: string, tags: Record<string, string>): Promise<void> {
    const body = Buffer.from(buildXml('Tagging', { TagSet: { Tag: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) } }));
    const md5 = createHash('md5').update(body).digest('base64');
    const r = await this.send({ op: 'putTags', method: 'PUT', bucket, key, query: [['tagging', '']], body, md5, headers: { 'content-type': 'application/xml' } });
    await r.body.dump();
  }

  async deleteTags(bucket: string, key: string): Promise<void> {
    const r = await this.send({ op: 'deleteTags', method: 'DELETE', bucket, key, query: [['tagging', '']] });
    await r.body.dump();
  }

  // ---- listing ----

  async listPage(bucket: string, o: ListOptions & { token?: string } = {}): Promise<ListPage> {
    const q: Array<[string, string]> = [['list-type', '2'], ['encoding-type', 'url']];
    if (o.metadata) q.push(['metadata', 'true'], [JSON_LISTING.param, 'json']);
    if (o.prefix) q.push(['prefix', o.prefix]);
    if (o.delimiter) q.push(['delimiter', o.delimiter]);
    if (o.token) q.push(['continuation-token', o.token]);
    if (o.startAfter) q.push(['start-after', o.startAfter]);
    if (o.maxKeys !== undefined) q.push(['max-keys', String(o.maxKeys)]);
    const r = await this.send({ op: 'list', method: 'GET', bucket, query: q });
    if (r.headers['content-type'] === JSON_LISTING.contentType) return listPageOf(await r.body.json() as JsonListing);
    const doc = parseXml(await r.body.text()).ListBucketResult ?? {};
    const enc = textOf(doc.EncodingType) === 'url';
    const dec = (s: string) => (enc ? decodeURIComponent(s.replace(/\+/g, ' ')) : s);
    return {
      contents: (doc.Contents ?? []).map((c: any) => ({
        key: dec(textOf(c.Key)), size: Number(textOf(c.Size)), etag: textOf(c.ETag).replace(/^"|"$/g, ''), lastModified: new Date(textOf(c.LastModified)),
        // an empty <UserMetadata/> still says the store answered the metadata extension
        meta: c.UserMetadata !== undefined ? metaOf(c.UserMetadata, dec) : undefined,
      })),
      prefixes: (doc.CommonPrefixes ?? []).map((p: any) => dec(textOf(p.Prefix))),
      prefixMeta: new Map((doc.CommonPrefixes ?? []).filter((p: any) => p.UserMetadata !== undefined).map((p: any) => [dec(textOf(p.Prefix)), metaOf(p.UserMetadata, dec)])),
      truncated: textOf(doc.IsTruncated) === 'true',
      next: textOf(doc.NextContinuationToken) || undefined,
    };
  }

  /** Every page of a listing, in order. */
  async *list(bucket: string, o: ListOptions = {}): AsyncGenerator<ListPage> {
    let token: string | undefined;
    for (;;) {
      const page = await this.listPage(bucket, { ...o, token, startAfter: token ? undefined : o.startAfter });
      yield page;
      if (!page.truncated || !page.next) return;
      token = page.next;
    }
  }

  // ---- multipart ----

  async createMultipart(bucket: string, key: string, o: PutOptions = {}): Promise<string> {
    const r = await this.send({ op: 'createMultipart', method: 'POST', bucket, key, query: [['uploads', '']], headers: this.putHeaders({ ...o, ifMatch: undefined, ifNoneMatch: undefined }) });
    return textOf(parseXml(await r.body.text()).InitiateMultipartUploadResult?.UploadId);
  }

  async uploadPart(bucket: string, key: string, uploadId: string, partNumber: number, body: Body): Promise<string> {
    const r = await this.send({ op: 'uploadPart', method: 'PUT', bucket, key, query: [['partNumber', String(partNumber)], ['uploadId', uploadId]], body, sha256: await this.uploadHash(body) });
    await r.body.dump();
    return (r.headers.etag ?? '').replace(/^"|"$/g, '');
  }

  async completeMultipart(bucket: string, key: string, uploadId: string, parts: Array<{ partNumber: number; etag: string }>, o: Pick<PutOptions, 'ifMatch' | 'ifNoneMatch' | 'unquotedIfMatch'> = {}): Promise<string> {
    const body = Buffer.from(buildXml('CompleteMultipartUpload', { Part: parts.map((p) => ({ PartNumber: p.partNumber, ETag: `"${p.etag}"` })) }));
    const headers: Record<string, string> = { 'content-type': 'application/xml' };
    if (o.ifMatch) headers['if-match'] = ifMatchValue(o.ifMatch, o.unquotedIfMatch);
    if (o.ifNoneMatch) headers['if-none-match'] = o.ifNoneMatch;
    const r = await this.send({ op: 'completeMultipart', method: 'POST', bucket, key, query: [['uploadId', uploadId]], body, headers });
    return textOf(parseXml(await r.body.text()).CompleteMultipartUploadResult?.ETag).replace(/^"|"$/g, '');
  }

  async abortMultipart(bucket: string, key: string, uploadId: string): Promise<void> {
    const r = await this.send({ op: 'abortMultipart', method: 'DELETE', bucket, key, query: [['uploadId', uploadId]], accept: [404] });
    await r.body.dump();
  }

  async listParts(bucket: string, key: string, uploadId: string): Promise<Array<{ partNumber: number; etag: string; size: number }>> {
    const r = await this.send({ op: 'listParts', method: 'GET', bucket, key, query: [['uploadId', uploadId]] });
    const doc = parseXml(await r.body.text()).ListPartsResult ?? {};
    return (doc.Part ?? []).map((p: any) => ({ partNumber: Number(textOf(p.PartNumber)), etag: textOf(p.ETag).replace(/^"|"$/g, ''), size: Number(textOf(p.Size)) }));
  }
}

/** A JSON listing page (svcfs serve) as a ListPage; a page of another shape is a protocol error. */
function listPageOf(j: JsonListing): ListPage {
  if (!j || !Array.isArray(j.contents) || !Array.isArray(j.prefixes)) throw new SvcError('MalformedListing', 'the JSON listing has no contents or prefixes');
  const prefixMeta = new Map<string, Record<string, string>>();
  for (const p of j.prefixes) if (p.meta) prefixMeta.set(p.prefix, p.meta);
  return {
    contents: j.contents.map((c) => ({ key: c.key, size: c.size, etag: c.etag, lastModified: new Date(c.lastModified), meta: c.meta })),
    prefixes: j.prefixes.map((p) => p.prefix),
    prefixMeta,
    truncated: j.isTruncated === true,
    next: j.next,
  };
}

function metaOf(um: any, dec: (s: string) => string): Record<string, string> {
  return Object.fromEntries((um.Entry ?? []).map((e: any) => [textOf(e.Name), dec(textOf(e.Value))]));
}

/** A typed error from an error response (XML body when there is one). */
export function errorFrom(status: number, text: string, requestId?: string): SvcError {
  let code = status === 404 ? 'NotFound' : status === 403 ? 'AccessDenied' : status === 412 ? 'PreconditionFailed' : `Http${status}`;
  let message = `HTTP ${status}`;
  if (text.includes('<Error')) {
    try {
      const e = parseXml(text).Error ?? {};
      code = textOf(e.Code) || code;
      message = textOf(e.Message) || message;
      requestId = textOf(e.RequestId) || requestId;
    } catch {
      /* not XML after all: keep the status-derived code */
    }
  }
  return new SvcError(code, message, status, requestId);
}
