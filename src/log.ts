import pino, { type DestinationStream, type Logger } from 'pino';
import { mapStack } from './source-maps.ts';

/** JSON-lines logger. Credentials are redacted wherever they could appear. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: undefined,
    // An error's stack names the TypeScript sources also when the server runs as a bundle.
    serializers: { err: serializeError },
    redact: {
      paths: [
        'password',
        '*.password',
        'token',
        '*.token',
        'secret',
        '*.secret',
        'authorization',
        '*.authorization',
        'headers.authorization',
        'req.headers.authorization',
        '*.headers["x-svc-credential-approval"]',
        'url',
        '*.database_url',
      ],
      censor: '[redacted]',
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

function serializeError(err: unknown): unknown {
  const out = pino.stdSerializers.err(err as Error) as unknown;
  if (out && typeof out === 'object' && typeof (out as { stack?: unknown }).stack === 'string') {
    (out as { stack: string }).stack = mapStack((out as { stack: string }).stack);
  }
  return out;
}
