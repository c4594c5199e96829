import { STATUS_CODES } from 'node:http';

export interface ErrorDetail {
  path: string;
  message: string;
}

export interface ErrorBody {
  error: string;
  message: string;
  reason?: string;
  guidance?: string;
  details?: ErrorDetail[];
}

/** Every kind of failure the service reports, and the one place each is given its HTTP status. */
export const ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  gone: 410,
  precondition_failed: 412,
  payload_too_large: 413,
  unsupported_media_type: 415,
  too_many_requests: 429,
  unavailable: 503,
} as const satisfies Record<string, number>;

export type ErrorKind = keyof typeof ERROR_STATUS;

export interface ApiErrorOptions {
  reason?: string;
  guidance?: string;
  details?: ErrorDetail[];
  /** When the caller may try again (too_many_requests, unavailable); rendered as Retry-After. */
  retryAfterSeconds?: number;
  /** The resource's current entity tag (precondition_failed); rendered as ETag. */
  etag?: string;
  /** The methods the path takes (method_not_allowed); rendered as Allow. */
  allow?: string;
}

/** The one error type the layers throw; the app renders it. */
export class ApiError extends Error {
  readonly kind: ErrorKind;
  readonly reason?: string;
  readonly guidance?: string;
  readonly details?: ErrorDetail[];
  readonly retryAfterSeconds?: number;
  readonly etag?: string;
  readonly allow?: string;

  constructor(kind: ErrorKind, message: string, opts: ApiErrorOptions = {}) {
    // A client error (4xx) is an answer, not a fault: the app renders it and logs no stack of it
    // (where one ends a task, its kind and message are logged). Capturing the stack deep in a
    // request made a refused request cost 65-78 µs of CPU instead of 51-54: a flood of
    // unauthenticated requests spent a tenth of its CPU in this constructor. 503 keeps its stack.
    const frames = Error.stackTraceLimit;
    if (ERROR_STATUS[kind] < 500) Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = frames;
    this.kind = kind;
    this.reason = opts.reason;
    this.guidance = opts.guidance;
    this.details = opts.details;
    this.retryAfterSeconds = opts.retryAfterSeconds;
    this.etag = opts.etag;
    this.allow = opts.allow;
  }

  get status(): number {
    return ERROR_STATUS[this.kind];
  }

  body(): ErrorBody {
    const b: ErrorBody = { error: reasonPhrase(this.status), message: this.message };
    if (this.reason) b.reason = this.reason;
    if (this.guidance) b.guidance = this.guidance;
    if (this.details) b.details = this.details;
    return b;
  }
}

/** An ApiError the caller caused (every kind below 500): safe to report back as it is. */
export function isClientError(err: unknown): err is ApiError {
  return err instanceof ApiError && err.status < 500;
}

export function reasonPhrase(status: number): string {
  return STATUS_CODES[status] ?? 'Error';
}

export const badRequest = (message: string, details?: ErrorDetail[]) => new ApiError('bad_request', message, { details });
export const unauthorized = () =>
  new ApiError('unauthorized', 'authentication required: the token is missing, invalid, revoked or expired');
export const forbidden = (message = 'you do not have permission for this operation') => new ApiError('forbidden', message);
export const notFound = (what = 'resource') => new ApiError('not_found', `${what} not found`);
export const conflict = (message: string, reason?: string) => new ApiError('conflict', message, { reason });
