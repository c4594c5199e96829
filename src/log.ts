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

const INFO = pino.levels.values.info;

/**
 * Writes an INFO line to `log`'s stream whose members the caller serialised itself
 * (`"a":1,"b":"x"`), in the form pino gives a line of this logger: `{"level":30,"time":<epoch ms>,
 * <members>,"msg":<msg>}`, unredacted. For the `request` line of every request
 * (http/request-log.ts), whose fields are fixed and hold no credential: through pino, its
 * redaction (pino 10 clones each line's object and serialises it a second time, the wildcard paths
 * above applying to every line) was more of the process's time than all of the service's own code,
 * and without it pino took 1.05-1.21 µs a line against 0.61-0.67 written here (bench/FINDINGS.md,
 * 2026-12-06). The caller checks the level (`log.isLevelEnabled('info')`).
 */
export function writeInfoLine(log: Logger, members: string, msg: string): void {
  const stream = (log as unknown as { [pino.symbols.streamSym]: DestinationStream })[pino.symbols.streamSym];
  stream.write(`{"level":${INFO},"time":${Date.now()},${members},"msg":${JSON.stringify(msg)}}\n`);
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
