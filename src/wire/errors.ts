// S3-style error codes with their HTTP statuses, shared by server (to answer)
// and client (to type what it receives).

export const ERROR_STATUS: Record<string, number> = {
  AccessDenied: 403,
  AuthorizationHeaderMalformed: 400,
  AuthorizationQueryParametersError: 400,
  BadDigest: 400,
  EntityTooLarge: 400,
  EntityTooSmall: 400,
  IncompleteBody: 400,
  InternalError: 500,
  InvalidAccessKeyId: 403,
  InvalidArgument: 400,
  InvalidBucketName: 400,
  InvalidDigest: 400,
  InvalidPart: 400,
  InvalidPartOrder: 400,
  InvalidRange: 416,
  InvalidRequest: 400,
  InvalidTag: 400,
  InvalidURI: 400,
  KeyTooLongError: 400,
  MalformedXML: 400,
  MetadataTooLarge: 400,
  MethodNotAllowed: 405,
  MissingContentLength: 411,
  MissingSecurityHeader: 400,
  NoSuchBucket: 404,
  NoSuchKey: 404,
  NoSuchUpload: 404,
  NotImplemented: 501,
  PreconditionFailed: 412,
  RequestTimeTooSkewed: 403,
  SignatureDoesNotMatch: 403,
  ServiceUnavailable: 503,
  SlowDown: 503,
  XAmzContentSHA256Mismatch: 400,
  XSvcContentSHA256Mismatch: 400,
  BucketAlreadyOwnedByYou: 409,
};

/** An error the server answers with, or the client received. */
export class SvcError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number = ERROR_STATUS[code] ?? 500,
    readonly requestId?: string,
    readonly resource?: string,
  ) {
    super(message);
    this.name = 'SvcError';
  }
}
