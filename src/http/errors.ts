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

/** The one error type handlers throw; the app renders it. */
export class ApiError extends Error {
  readonly status: number;
  readonly reason?: string;
  readonly guidance?: string;
  readonly details?: ErrorDetail[];
  readonly headers?: Record<string, string>;

  constructor(
    status: number,
    message: string,
    opts: { reason?: string; guidance?: string; details?: ErrorDetail[]; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.status = status;
    this.reason = opts.reason;
    this.guidance = opts.guidance;
    this.details = opts.details;
    this.headers = opts.headers;
  }

  body(): ErrorBody {
    const b: ErrorBody = { error: reasonPhrase(this.status), message: this.message };
    if (this.reason) b.reason = this.reason;
    if (this.guidance) b.guidance = this.guidance;
    if (this.details) b.details = this.details;
    return b;
  }
}

export function reasonPhrase(status: number): string {
  return STATUS_CODES[status] ?? 'Error';
}

export const badRequest = (message: string, details?: ErrorDetail[]) => new ApiError(400, message, { details });
export const unauthorized = () => new ApiError(401, 'authentication required: the token is missing, invalid, revoked or expired');
export const forbidden = (message = 'you do not have permission for this operation') => new ApiError(403, message);
export const notFound = (what = 'resource') => new ApiError(404, `${what} not found`);
export const conflict = (message: string, reason?: string) => new ApiError(409, message, { reason });
export const notImplemented = (operationId: string) =>
  new ApiError(501, `operation ${operationId} is not implemented yet`, { reason: 'not_implemented' });
