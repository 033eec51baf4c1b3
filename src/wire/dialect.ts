// SVC4 is AWS Signature V4 with renamed constants. One signer serves both
// dialects; everything dialect-specific lives in this table.

export type DialectName = 'svc' | 'aws';

export interface Dialect {
  readonly name: DialectName;
  /** `SVC4-HMAC-SHA256` */
  readonly algorithm: string;
  /** prefix joined with the secret to start the signing-key chain: `SVC4` */
  readonly keyPrefix: string;
  /** scope terminator: `svc4_request` */
  readonly terminator: string;
  /** lower-case header prefix: `x-svc-` */
  readonly headerPrefix: string;
  /** query parameter prefix of pre-signed URLs: `X-Svc-` */
  readonly paramPrefix: string;
  /** v2 scheme: `Authorization: SVC AK:sig` */
  readonly v2Scheme: string;
  /** v2 pre-signed URL access key parameter */
  readonly v2KeyParam: string;
}

export const SVC: Dialect = {
  name: 'svc',
  algorithm: 'SVC4-HMAC-SHA256',
  keyPrefix: 'SVC4',
  terminator: 'svc4_request',
  headerPrefix: 'x-svc-',
  paramPrefix: 'X-Svc-',
  v2Scheme: 'SVC',
  v2KeyParam: 'SvcAccessKeyId',
};

export const AWS: Dialect = {
  name: 'aws',
  algorithm: 'AWS4-HMAC-SHA256',
  keyPrefix: 'AWS4',
  terminator: 'aws4_request',
  headerPrefix: 'x-amz-',
  paramPrefix: 'X-Amz-',
  v2Scheme: 'AWS',
  v2KeyParam: 'AWSAccessKeyId',
};

export const DIALECTS: readonly Dialect[] = [SVC, AWS];

export function dialectByName(name: string): Dialect {
  if (name === 'svc') return SVC;
  if (name === 'aws') return AWS;
  throw new Error(`unknown dialect "${name}" (expected svc or aws)`);
}

export const SERVICE = 's3';
export const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
export const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
