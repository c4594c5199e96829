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

const unredactedOf = new WeakMap<Logger, Logger>();

/**
 * `log` without its redaction, on the same stream and at the same level, for a line whose fields
 * are fixed and can hold no credential: the `request` line of every request (http/request-log.ts).
 * pino 10 redacts by cloning each line's object and serialising it a second time
 * (@pinojs/redact; the wildcard paths above apply to every line): profiled under `/healthz` at
 * `info`, more of the process's time than all of the service's own code (bench/FINDINGS.md,
 * 2026-12-06).
 */
export function unredacted(log: Logger): Logger {
  let plain = unredactedOf.get(log);
  if (!plain) {
    const stream = (log as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym];
    plain = pino({ level: log.level, base: undefined }, stream);
    unredactedOf.set(log, plain);
  }
  return plain;
}

/** Most bytes of log lines that may wait for stdout; a line beyond them is dropped (and counted). */
export const LOG_BUFFER_MAX_BYTES = 16 * 1024 * 1024;

/**
 * The service's stdout for its log lines, written off the event loop: a thread of libuv's pool
 * writes what waits, and the lines logged while a write is under way go out together in the next
 * one, so under load one write carries many lines. (pino's default writes stdout synchronously, a
 * write a line on the event loop: with the `request` line of every request, `/healthz` served
 * 20.6–22.3k/s so against 23.1–27.0k/s so; bench/FINDINGS.md, 2026-12-06.) A stdout that does not
 * keep up (a stalled reader of the pipe) makes lines wait, up to LOG_BUFFER_MAX_BYTES; past that a
 * line is dropped and `onDrop` called, where a synchronous write would stall every request. What
 * still waits when the process exits is written then (pino flushes on 'exit'); a SIGKILL loses it.
 */
export function stdoutLogDestination(onDrop: () => void): DestinationStream {
  const dest = pino.destination({ dest: 1, sync: false, maxLength: LOG_BUFFER_MAX_BYTES });
  dest.on('drop', onDrop);
  return dest;
}

function serializeError(err: Error): unknown {
  // Not an Error-like object, stdSerializers.err returns it as it is (a string, say).
  const out = pino.stdSerializers.err(err) as { stack?: unknown } | null | undefined;
  if (typeof out?.stack === 'string') out.stack = mapStack(out.stack);
  return out;
}
