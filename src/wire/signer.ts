// The SVC4 / AWS4 request signer (header form and pre-signed URLs) and the
// older v2 scheme. Pure functions shared by the server (to verify) and the
// client (to sign). S3 rules: the canonical URI is each path segment
// URI-encoded once, with no normalisation.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { Dialect, SERVICE, UNSIGNED_PAYLOAD } from './dialect';

const UNRESERVED = /[A-Za-z0-9\-_.~]/;
const ALL_UNRESERVED = /^[A-Za-z0-9\-_.~]*$/;
const ALL_UNRESERVED_OR_SLASH = /^[A-Za-z0-9\-_.~/]*$/;

/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters, UTF-8, upper-case hex. */
export function uriEncode(s: string, encodeSlash = true): string {
  // most keys and values need nothing encoded: one regex test instead of one per character
  if ((encodeSlash ? ALL_UNRESERVED : ALL_UNRESERVED_OR_SLASH).test(s)) return s;
  let out = '';
  for (const ch of s) {
    if (UNRESERVED.test(ch)) out += ch;
    else if (ch === '/' && !encodeSlash) out += ch;
    else for (const b of Buffer.from(ch, 'utf8')) out += '%' + b.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

/** `/bucket/key` -> the path as it goes on the wire (and into the canonical request). */
export function encodePath(decodedPath: string): string {
  return uriEncode(decodedPath, false);
}

export function sha256Hex(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

function hmac(key: Buffer | string, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

/** Sorted, encoded `k=v&k2=v2`; pairs are decoded names and values. */
export function canonicalQuery(pairs: ReadonlyArray<readonly [string, string]>): string {
  return pairs
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

function trimValue(v: string): string {
  return v.trim().replace(/\s+/g, ' ');
}

export type HeaderBag = Record<string, string | string[] | undefined>;

/** Header value by case-insensitive name; repeated headers joined with ','. */
export function headerValue(headers: HeaderBag, name: string): string | undefined {
  const lower = name.toLowerCase();
  for (const k of Object.keys(headers)) {
    if (k.toLowerCase() !== lower) continue;
    const v = headers[k];
    if (v === undefined) return undefined;
    return Array.isArray(v) ? v.map(trimValue).join(',') : trimValue(String(v));
  }
  return undefined;
}

export function canonicalHeaders(headers: HeaderBag, signed: readonly string[]): string {
  return signed.map((n) => `${n}:${headerValue(headers, n) ?? ''}\n`).join('');
}

export interface CanonicalInput {
  method: string;
  /** the encoded path, exactly as in the canonical request */
  canonicalUri: string;
  query: ReadonlyArray<readonly [string, string]>;
  headers: HeaderBag;
  signedHeaders: readonly string[];
  payloadHash: string;
}

export function canonicalRequest(c: CanonicalInput): string {
  return [
    c.method.toUpperCase(),
    c.canonicalUri,
    canonicalQuery(c.query),
    canonicalHeaders(c.headers, c.signedHeaders),
    c.signedHeaders.join(';'),
    c.payloadHash,
  ].join('\n');
}

export function scopeOf(d: Dialect, date8: string, region: string, service = SERVICE): string {
  return `${date8}/${region}/${service}/${d.terminator}`;
}

export function stringToSign(d: Dialect, timestamp: string, scope: string, creq: string): string {
  return [d.algorithm, timestamp, scope, sha256Hex(creq)].join('\n');
}

// Signing keys change once a day per region: cache them (bounded).
const keyCache = new Map<string, Buffer>();
export function signingKey(d: Dialect, secret: string, date8: string, region: string, service = SERVICE): Buffer {
  const id = `${d.name}\0${secret}\0${date8}\0${region}\0${service}`;
  const hit = keyCache.get(id);
  if (hit) return hit;
  const k = hmac(hmac(hmac(hmac(d.keyPrefix + secret, date8), region), service), d.terminator);
  if (keyCache.size >= 256) keyCache.clear();
  keyCache.set(id, k);
  return k;
}

export function signatureOf(key: Buffer, sts: string): string {
  return createHmac('sha256', key).update(sts, 'utf8').digest('hex');
}

/** `20130524T000000Z` */
export function amzTimestamp(d: Date): string {
  return d.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
}

/** Parse `yyyyMMddTHHmmssZ`; undefined when malformed. */
export function parseAmzTimestamp(s: string): Date | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s);
  if (!m) return undefined;
  const t = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]);
  return Number.isNaN(t) ? undefined : new Date(t);
}

/** Compare two hex/base64 signatures in constant time. */
export function safeEqual(a: string, b: string): boolean {
  const x = createHash('sha256').update(a).digest();
  const y = createHash('sha256').update(b).digest();
  return timingSafeEqual(x, y) && a.length === b.length;
}

export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

/** Who signs what: common to the header form and pre-signed URLs. */
export interface SigningTarget {
  dialect: Dialect;
  credentials: Credentials;
  region: string;
  method: string;
  /** full URL (origin and query; existing query parameters are signed too); its path must already be encoded */
  url: URL;
  /**
   * the encoded path when it differs from url.pathname: WHATWG URLs resolve
   * `.` and `..` segments, which are legitimate parts of object keys
   */
  path?: string;
}

export interface SignRequestInput extends SigningTarget {
  /** headers to send; `host` is added when missing */
  headers: Record<string, string>;
  /** hex SHA-256 of the body, or UNSIGNED-PAYLOAD */
  payloadHash: string;
  /** sign the payload hash without sending it as a header (as curl --aws-sigv4 does) */
  omitContentSha256?: boolean;
  now?: Date;
}

const UNSIGNED_HEADERS = new Set(['user-agent', 'expect', 'connection', 'transfer-encoding', 'keep-alive', 'authorization']);

/** Query pairs of a URL, decoded, in order. */
export function queryPairs(url: URL): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  url.searchParams.forEach((v, k) => out.push([k, v]));
  return out;
}

/**
 * Sign in the header form: returns the headers to send (input headers plus
 * host, date, content hash and Authorization). Every header given is signed
 * but those a proxy may legitimately change.
 */
export function signRequest(i: SignRequestInput): Record<string, string> {
  const d = i.dialect;
  const now = i.now ?? new Date();
  const ts = amzTimestamp(now);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(i.headers)) headers[k.toLowerCase()] = v;
  headers.host ??= i.url.host;
  headers[d.headerPrefix + 'date'] = ts;
  if (!i.omitContentSha256) headers[d.headerPrefix + 'content-sha256'] = i.payloadHash;
  const signed = Object.keys(headers).filter((n) => !UNSIGNED_HEADERS.has(n)).sort();
  const scope = scopeOf(d, ts.slice(0, 8), i.region);
  const creq = canonicalRequest({
    method: i.method,
    canonicalUri: i.path ?? i.url.pathname,
    query: queryPairs(i.url),
    headers,
    signedHeaders: signed,
    payloadHash: i.payloadHash,
  });
  const sig = signatureOf(signingKey(d, i.credentials.secretAccessKey, ts.slice(0, 8), i.region), stringToSign(d, ts, scope, creq));
  headers.authorization = `${d.algorithm} Credential=${i.credentials.accessKeyId}/${scope}, SignedHeaders=${signed.join(';')}, Signature=${sig}`;
  return headers;
}

export interface PresignInput extends SigningTarget {
  expiresSeconds: number;
  /** extra headers the holder must send (x-svc-* ones are always signed) */
  headers?: Record<string, string>;
  /** add `X-Svc-Content-Sha256=UNSIGNED-PAYLOAD` to the query */
  withContentSha256?: boolean;
  now?: Date;
}

export const MAX_PRESIGN_EXPIRES = 604800;

/** A pre-signed URL: anyone holding it may perform that one operation until it expires. */
export function presignUrl(i: PresignInput): URL {
  if (!Number.isInteger(i.expiresSeconds) || i.expiresSeconds < 1 || i.expiresSeconds > MAX_PRESIGN_EXPIRES) {
    throw new RangeError(`expiry must be a whole number of seconds from 1 to ${MAX_PRESIGN_EXPIRES}`);
  }
  const d = i.dialect;
  const p = d.paramPrefix;
  const ts = amzTimestamp(i.now ?? new Date());
  const scope = scopeOf(d, ts.slice(0, 8), i.region);
  const headers: Record<string, string> = { host: i.url.host };
  for (const [k, v] of Object.entries(i.headers ?? {})) headers[k.toLowerCase()] = v;
  const signed = Object.keys(headers).sort();
  const url = new URL(i.url.toString());
  url.searchParams.set(`${p}Algorithm`, d.algorithm);
  if (i.withContentSha256) url.searchParams.set(`${p}Content-Sha256`, UNSIGNED_PAYLOAD);
  url.searchParams.set(`${p}Credential`, `${i.credentials.accessKeyId}/${scope}`);
  url.searchParams.set(`${p}Date`, ts);
  url.searchParams.set(`${p}Expires`, String(i.expiresSeconds));
  url.searchParams.set(`${p}SignedHeaders`, signed.join(';'));
  const creq = canonicalRequest({
    method: i.method,
    canonicalUri: i.path ?? url.pathname,
    query: queryPairs(url),
    headers,
    signedHeaders: signed,
    payloadHash: UNSIGNED_PAYLOAD,
  });
  const sig = signatureOf(signingKey(d, i.credentials.secretAccessKey, ts.slice(0, 8), i.region), stringToSign(d, ts, scope, creq));
  url.searchParams.set(`${p}Signature`, sig);
  // URLSearchParams writes spaces as '+'; S3 wants %20 (and '+' would decode as a space there).
  url.search = url.search.replace(/\+/g, '%20');
  return url;
}

/** A pre-signed URL as text, with the exact encoded path (dot segments kept). */
export function presignedUrlString(i: PresignInput & { path: string }): string {
  const u = presignUrl(i);
  return `${u.origin}${i.path}${u.search}`;
}

// ---- aws-chunked streaming payloads (signed chunks) ----

export function chunkStringToSign(d: Dialect, timestamp: string, scope: string, prevSig: string, chunkHash: string): string {
  return [`${d.algorithm}-PAYLOAD`, timestamp, scope, prevSig, sha256Hex(''), chunkHash].join('\n');
}

export function trailerStringToSign(d: Dialect, timestamp: string, scope: string, prevSig: string, trailerHash: string): string {
  return [`${d.algorithm}-TRAILER`, timestamp, scope, prevSig, trailerHash].join('\n');
}

// ---- v2 (HMAC-SHA1) ----

/** Sub-resources that take part in the v2 canonical resource. */
const V2_SUBRESOURCES = new Set([
  'acl', 'delete', 'lifecycle', 'location', 'logging', 'notification', 'partNumber', 'policy',
  'requestPayment', 'tagging', 'torrent', 'uploadId', 'uploads', 'versionId', 'versioning', 'versions',
  'website', 'response-cache-control', 'response-content-disposition', 'response-content-encoding',
  'response-content-language', 'response-content-type', 'response-expires',
]);

export interface V2Input {
  dialect: Dialect;
  method: string;
  /** encoded path as sent */
  path: string;
  query: ReadonlyArray<readonly [string, string]>;
  headers: HeaderBag;
  /** the Date header value, or the Expires seconds of a pre-signed URL */
  dateOrExpires: string;
}

export function v2StringToSign(i: V2Input): string {
  const pre = i.dialect.headerPrefix;
  const prefixed = new Map<string, string>();
  for (const k of Object.keys(i.headers)) {
    const n = k.toLowerCase();
    if (n.startsWith(pre) && n !== pre + 'date') prefixed.set(n, headerValue(i.headers, n) ?? '');
  }
  // With an x-svc-date header the Date line is empty and x-svc-date is signed as a prefixed header.
  const xdate = headerValue(i.headers, pre + 'date');
  if (xdate !== undefined) prefixed.set(pre + 'date', xdate);
  const canonHeaders = [...prefixed.keys()].sort().map((n) => `${n}:${prefixed.get(n)}\n`).join('');
  const subs = i.query
    .filter(([k]) => V2_SUBRESOURCES.has(k))
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([k, v]) => (v === '' ? k : `${k}=${v}`));
  const resource = i.path + (subs.length ? '?' + subs.join('&') : '');
  return [
    i.method.toUpperCase(),
    headerValue(i.headers, 'content-md5') ?? '',
    headerValue(i.headers, 'content-type') ?? '',
    xdate !== undefined ? '' : i.dateOrExpires,
    canonHeaders + resource,
  ].join('\n');
}

export function v2Signature(secret: string, sts: string): string {
  return createHmac('sha1', secret).update(sts, 'utf8').digest('base64');
}

/** Sign a request with the v2 scheme (header form). */
export function signRequestV2(i: Omit<V2Input, 'dateOrExpires' | 'path' | 'query'> & { url: URL; path?: string; credentials: Credentials; now?: Date }): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(i.headers)) if (v !== undefined) headers[k.toLowerCase()] = String(v);
  headers.date = (i.now ?? new Date()).toUTCString();
  const sts = v2StringToSign({ ...i, path: i.path ?? i.url.pathname, query: queryPairs(i.url), headers, dateOrExpires: headers.date });
  headers.authorization = `${i.dialect.v2Scheme} ${i.credentials.accessKeyId}:${v2Signature(i.credentials.secretAccessKey, sts)}`;
  return headers;
}
