// A small server-sent events writer: `event: <name>` and one JSON `data:` line per event.
// sseReply() returns a Reply whose raw body is a ReadableStream; the producer runs after the
// response has started, so the first events reach the client before any further work.
import { spliceJsonTexts } from '../domain/json-text.ts';

export interface SseWriter {
  /**
   * Queues one event; false once the client has gone away (stop working then). `jsonTexts`: the
   * JSON texts whose placeholders `data` holds (domain/json-text.ts), spliced in as a JSON reply's are.
   */
  send(event: string, data: unknown, jsonTexts?: readonly string[]): boolean;
  readonly closed: boolean;
}

/**
 * Formats one event (JSON never contains a raw newline, so one data line suffices; nor do the texts
 * spliced in, which are JSON too: PostgreSQL's jsonb text escapes them).
 */
export function formatSse(event: string, data: unknown, jsonTexts?: readonly string[]): string {
  const json = JSON.stringify(data);
  return `event: ${event}\ndata: ${jsonTexts?.length ? spliceJsonTexts(json, jsonTexts) : json}\n\n`;
}

/**
 * A 200 text/event-stream reply. `produce` writes the events; the stream ends when it settles.
 * An exception escaping `produce` ends the stream (callers send their own `error` event first).
 */
export function sseReply(
  produce: (w: SseWriter) => Promise<void>,
  opts: { headers?: Record<string, string>; onError?: (err: unknown) => void } = {},
): { status: 200; raw: ReadableStream<Uint8Array>; contentType: string; headers: Record<string, string> } {
  const encoder = new TextEncoder();
  let closed = false;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const writer: SseWriter = {
        send(event, data, jsonTexts) {
          if (closed) return false;
          try {
            controller.enqueue(encoder.encode(formatSse(event, data, jsonTexts)));
            return true;
          } catch {
            closed = true;
            return false;
          }
        },
        get closed() {
          return closed;
        },
      };
      // Not awaited: start() returns at once so the response begins streaming.
      void (async () => {
        try {
          await produce(writer);
        } catch (err) {
          opts.onError?.(err);
        } finally {
          if (!closed) {
            closed = true;
            try {
              controller.close();
            } catch {
              // already closed or cancelled
            }
          }
        }
      })();
    },
    cancel() {
      closed = true;
    },
  });
  return {
    status: 200,
    raw: stream,
    contentType: 'text/event-stream',
    headers: { 'cache-control': 'no-cache', 'x-accel-buffering': 'no', ...opts.headers },
  };
}
