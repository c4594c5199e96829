// Reading from the operator: a hidden line on a terminal (passwords), a visible one (confirmations),
// or everything piped to stdin.
import { Failure } from './errors.ts';

/** Whether the operator can be asked: stdin and stderr are both terminals. */
export function interactive(): boolean {
  return process.stdin.isTTY === true && process.stderr.isTTY === true;
}

/** Reads one line from the terminal; hidden: nothing is echoed. Ctrl-C or Ctrl-D gives up. */
export function askLine(question: string, hidden: boolean): Promise<string> {
  const stdin = process.stdin;
  process.stderr.write(question);
  return new Promise((ok, fail) => {
    let line = '';
    const finish = (err?: Error) => {
      stdin.removeListener('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
      if (err) fail(err);
      else ok(line);
    };
    const onData = (chunk: Buffer) => {
      for (const ch of chunk.toString('utf8')) {
        if (ch === '\r' || ch === '\n') return finish();
        if (ch === '\u0003' || ch === '\u0004') return finish(new Failure('cancelled'));
        if (ch === '\u007f' || ch === '\b') {
          const chars = [...line];
          if (chars.length) {
            chars.pop();
            line = chars.join('');
            if (!hidden) process.stderr.write('\b \b');
          }
          continue;
        }
        if (ch < ' ') continue;
        line += ch;
        if (!hidden) process.stderr.write(ch);
      }
    };
    stdin.setRawMode(true);
    stdin.resume();
    stdin.on('data', onData);
  });
}

/** Everything on stdin, as UTF-8 text. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
