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

function serializeError(err: Error): unknown {
  // Not an Error-like object, stdSerializers.err returns it as it is (a string, say).
  const out = pino.stdSerializers.err(err) as { stack?: unknown } | null | undefined;
  if (typeof out?.stack === 'string') out.stack = mapStack(out.stack);
  return out;
}
