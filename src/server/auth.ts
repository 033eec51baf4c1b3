// Request authentication. `begin` parses whatever credentials a request carries
// (v4 header, v4 pre-signed URL, v2 header or query, or none) and checks what
// can be checked before the body arrives; `finish` verifies the signature,
// given the SHA-256 of the received body when the request did not state it.
import { AWS, DIALECTS, Dialect, EMPTY_SHA256, SVC, UNSIGNED_PAYLOAD } from '../wire/dialect';
import { SvcError } from '../wire/errors';
import {
  HeaderBag, MAX_PRESIGN_EXPIRES, canonicalHeaders, canonicalQuery as canonicalQueryOf, encodePath, headerValue, parseAmzTimestamp, safeEqual,
  signatureOf, signingKey, stringToSign, v2Signature, v2StringToSign,
} from '../wire/signer';
import { ChunkSigning } from './chunked';
import { User, Users } from './users';

export const MAX_SKEW_MS = 15 * 60 * 1000;

export interface RequestInfo {
  method: string;
  /** path exactly as received (still encoded) */
  rawPath: string;
  /** decoded path: /bucket/key */
  decodedPath: string;
  /** decoded query pairs in order */
  query: Array<[string, string]>;
  /** the query string as received, without '?' */
  rawQuery: string;
  headers: HeaderBag;
  now: number;
}

/** How the body's integrity is established. */
export type Payload =
  | { kind: 'hash'; sha256: string } // stated; the body must match it
  | { kind: 'unsigned' } // UNSIGNED-PAYLOAD
  | { kind: 'deferred' } // not stated: the signature covers the hash of the body received
  | { kind: 'chunked'; signing?: ChunkSigning; trailerSigned: boolean; trailer: boolean };

export interface Pending {
  dialect: Dialect;
  anonymous: boolean;
  payload: Payload;
  /** Verify now (or with the received body's SHA-256 for deferred payloads); returns the user. */
  finish(bodySha256?: string): User | undefined;
}

function err(code: string, msg: string): SvcError {
  return new SvcError(code, msg);
}

function dialectOfAlgorithm(alg: string): Dialect | undefined {
  return DIALECTS.find((d) => d.algorithm === alg);
}

/** The dialect an unsigned request speaks: aws when it carries any x-amz- header. */
export function dialectOfHeaders(h: HeaderBag): Dialect {
  return Object.keys(h).some((k) => k.toLowerCase().startsWith(AWS.headerPrefix)) ? AWS : SVC;
}

export class Authenticator {
  constructor(private users: Users, private readonly maxSkewMs = MAX_SKEW_MS) {}

  /** The users file changed: requests from now on are checked against these. */
  setUsers(users: Users): void {
    this.users = users;
  }

  begin(r: RequestInfo): Pending {
    const authz = headerValue(r.headers, 'authorization');
    const q = new Map(r.query);
    if (authz !== undefined) {
      const v4 = /^([A-Z0-9]+-HMAC-SHA256) (.*)$/.exec(authz);
      if (v4) return this.headerV4(r, v4[1], v4[2]);
      const v2 = /^(AWS|SVC) ([^:]+):(.+)$/.exec(authz);
      if (v2) return this.v2(r, v2[1] === 'AWS' ? AWS : SVC, v2[2], v2[3], undefined);
      throw err('InvalidArgument', 'unsupported Authorization header');
    }
    for (const d of DIALECTS) {
      if (q.has(`${d.paramPrefix}Algorithm`) || q.has(`${d.paramPrefix}Signature`)) return this.queryV4(r, d, q);
      if (q.has(d.v2KeyParam)) return this.v2(r, d, q.get(d.v2KeyParam)!, q.get('Signature') ?? '', q.get('Expires'));
    }
    return { dialect: dialectOfHeaders(r.headers), anonymous: true, payload: { kind: 'unsigned' }, finish: () => undefined };
  }

  private user(ak: string): User {
    const u = this.users.get(ak);
    if (!u) throw err('InvalidAccessKeyId', 'The access key ID you provided does not exist in our records.');
    return u;
  }

  /** Candidate canonical URIs: S3 re-encodes the decoded path; some clients sign the raw path. */
  private uris(r: RequestInfo): string[] {
    const strict = encodePath(r.decodedPath);
    return strict === r.rawPath ? [strict] : [strict, r.rawPath];
  }

  /**
   * Check a v4 signature. Besides the S3 canonical form, the path and query as
   * received are tried: older curl (--aws-sigv4, 7.x) signs the query string
   * unsorted and unencoded.
   */
  private verifyV4(
    r: RequestInfo, d: Dialect, u: User, date8: string, region: string, service: string, ts: string,
    signed: string[], query: Array<[string, string]>, payloadHashes: string[], given: string,
  ): Buffer {
    const key = signingKey(d, u.secretAccessKey, date8, region, service);
    const scope = `${date8}/${region}/${service}/${d.terminator}`;
    const canonQuery = canonicalQueryOf(query);
    const queries = r.rawQuery && query === r.query && r.rawQuery !== canonQuery ? [canonQuery, r.rawQuery] : [canonQuery];
    for (const payloadHash of payloadHashes) {
      for (const uri of this.uris(r)) {
        for (const q of queries) {
          const creq = [r.method.toUpperCase(), uri, q, canonicalHeaders(r.headers, signed), signed.join(';'), payloadHash].join('\n');
          if (safeEqual(signatureOf(key, stringToSign(d, ts, scope, creq)), given)) return key;
        }
      }
    }
    throw err('SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided. Check your key and signing method.');
  }

  private headerV4(r: RequestInfo, alg: string, rest: string): Pending {
    const d = dialectOfAlgorithm(alg);
    if (!d) throw err('InvalidArgument', `unsupported algorithm ${alg}`);
    const parts = new Map<string, string>();
    for (const p of rest.split(',')) {
      const at = p.indexOf('=');
      if (at > 0) parts.set(p.slice(0, at).trim(), p.slice(at + 1).trim());
    }
    const cred = parts.get('Credential')?.split('/');
    const signed = parts.get('SignedHeaders')?.split(';');
    const sig = parts.get('Signature');
    if (!cred || cred.length !== 5 || !signed || !sig || cred[4] !== d.terminator) {
      throw err('AuthorizationHeaderMalformed', 'The authorization header is malformed.');
    }
    const [ak, date8, region, service] = cred;
    if (!signed.includes('host')) throw err('AuthorizationHeaderMalformed', 'SignedHeaders must include host.');
    const xdate = headerValue(r.headers, d.headerPrefix + 'date');
    let when: Date | undefined;
    let ts: string;
    if (xdate !== undefined) {
      when = parseAmzTimestamp(xdate);
      ts = xdate;
    } else {
      const hd = headerValue(r.headers, 'date');
      when = hd ? new Date(hd) : undefined;
      ts = when && !Number.isNaN(when.getTime()) ? when.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '') : '';
    }
    if (!when || Number.isNaN(when.getTime())) throw err('AccessDenied', `AWS authentication requires a valid Date or ${d.headerPrefix}date header`);
    if (ts.slice(0, 8) !== date8) throw err('AuthorizationHeaderMalformed', 'The credential date does not match the request date.');
    if (Math.abs(when.getTime() - r.now) > this.maxSkewMs) {
      throw err('RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.');
    }
    const u = this.user(ak);
    const claim = headerValue(r.headers, d.headerPrefix + 'content-sha256');
    const verify = (payloadHash: string, ...more: string[]) => this.verifyV4(r, d, u, date8, region, service, ts, signed, r.query, [payloadHash, ...more], sig);
    const base = { dialect: d, anonymous: false };
    if (claim === undefined) {
      // No stated hash: the signature covers the hash of the body received. curl 7.x
      // signs the empty hash for uploads it streams (-T); that is taken as an unsigned payload.
      return { ...base, payload: { kind: 'deferred' }, finish: (bodySha = EMPTY_SHA256) => (verify(bodySha, ...(bodySha === EMPTY_SHA256 ? [] : [EMPTY_SHA256])), u) };
    }
    if (claim === UNSIGNED_PAYLOAD || /^[0-9a-f]{64}$/.test(claim)) {
      verify(claim);
      const payload: Payload = claim === UNSIGNED_PAYLOAD ? { kind: 'unsigned' } : { kind: 'hash', sha256: claim };
      return { ...base, payload, finish: () => u };
    }
    const streaming = /^STREAMING-(?:([A-Z0-9]+-HMAC-SHA256)-PAYLOAD|UNSIGNED-PAYLOAD)(-TRAILER)?$/.exec(claim);
    if (streaming) {
      const key = verify(claim);
      const signing = streaming[1] ? { dialect: d, key, timestamp: ts, scope: `${date8}/${region}/${service}/${d.terminator}`, seed: sig } : undefined;
      if (streaming[1] && streaming[1] !== d.algorithm) throw err('InvalidArgument', `unsupported payload signing ${streaming[1]}`);
      return { ...base, payload: { kind: 'chunked', signing, trailer: !!streaming[2], trailerSigned: !!(streaming[1] && streaming[2]) }, finish: () => u };
    }
    throw err('InvalidArgument', `${d.headerPrefix}content-sha256 must be a hex SHA-256, UNSIGNED-PAYLOAD or a STREAMING- value`);
  }

  private queryV4(r: RequestInfo, d: Dialect, q: Map<string, string>): Pending {
    const p = d.paramPrefix;
    const bad = (m: string) => err('AuthorizationQueryParametersError', m);
    if (q.get(`${p}Algorithm`) !== d.algorithm) throw bad(`${p}Algorithm only supports "${d.algorithm}"`);
    const cred = q.get(`${p}Credential`)?.split('/');
    const ts = q.get(`${p}Date`) ?? '';
    const expires = q.get(`${p}Expires`) ?? '';
    const signed = q.get(`${p}SignedHeaders`)?.split(';');
    const sig = q.get(`${p}Signature`);
    if (!cred || cred.length !== 5 || cred[4] !== d.terminator || !signed || !sig) {
      throw bad(`Query-string authentication requires the ${p}Algorithm, ${p}Credential, ${p}Signature, ${p}Date, ${p}SignedHeaders and ${p}Expires parameters.`);
    }
    const when = parseAmzTimestamp(ts);
    if (!when) throw bad(`${p}Date must be in the ISO8601 Long Format "yyyyMMdd'T'HHmmss'Z'"`);
    if (!/^\d+$/.test(expires) || +expires < 1 || +expires > MAX_PRESIGN_EXPIRES) {
      throw bad(`${p}Expires must be a whole number of seconds from 1 to ${MAX_PRESIGN_EXPIRES}`);
    }
    const [ak, date8, region, service] = cred;
    if (ts.slice(0, 8) !== date8) throw bad(`Invalid credential date. Date is not the same as ${p}Date.`);
    if (when.getTime() > r.now + this.maxSkewMs) {
      throw err('RequestTimeTooSkewed', 'The request time is more than 15 minutes ahead of the server time.');
    }
    if (when.getTime() + +expires * 1000 < r.now) throw err('AccessDenied', 'Request has expired');
    if (!signed.includes('host')) throw bad('SignedHeaders must include host');
    for (const h of Object.keys(r.headers)) {
      const n = h.toLowerCase();
      if (n.startsWith(d.headerPrefix) && !signed.includes(n)) throw err('AccessDenied', `There were headers present in the request which were not signed: ${n}`);
    }
    const u = this.user(ak);
    const query = r.query.filter(([k]) => k !== `${p}Signature`);
    this.verifyV4(r, d, u, date8, region, service, ts, signed, query, [UNSIGNED_PAYLOAD], sig);
    return { dialect: d, anonymous: false, payload: { kind: 'unsigned' }, finish: () => u };
  }

  private v2(r: RequestInfo, d: Dialect, ak: string, sig: string, expires: string | undefined): Pending {
    let dateOrExpires: string;
    if (expires !== undefined) {
      if (!/^\d+$/.test(expires)) throw err('AccessDenied', 'Expires must be a number of seconds since the epoch');
      if (+expires * 1000 < r.now) throw err('AccessDenied', 'Request has expired');
      dateOrExpires = expires;
    } else {
      const xdate = headerValue(r.headers, d.headerPrefix + 'date');
      dateOrExpires = headerValue(r.headers, 'date') ?? '';
      const when = new Date(xdate ?? dateOrExpires);
      if (Number.isNaN(when.getTime())) throw err('AccessDenied', 'v2 authentication requires a valid Date header');
      if (Math.abs(when.getTime() - r.now) > this.maxSkewMs) {
        throw err('RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.');
      }
    }
    const u = this.user(ak);
    const query = expires !== undefined ? r.query.filter(([k]) => k !== 'Signature' && k !== d.v2KeyParam && k !== 'Expires') : r.query;
    const ok = this.uris(r).some((path) =>
      safeEqual(v2Signature(u.secretAccessKey, v2StringToSign({ dialect: d, method: r.method, path, query, headers: r.headers, dateOrExpires })), sig));
    if (!ok) throw err('SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided.');
    return { dialect: d, anonymous: false, payload: { kind: 'unsigned' }, finish: () => u };
  }
}

export { Users };
