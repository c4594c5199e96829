// ConnectionKeeper on its own, with plain objects as connections: sharing, dropping, and the age
// after which a kept connection serves no new send.
import { describe, expect, it, vi } from 'vitest';
import { ConnectionKeeper } from './kept.ts';

interface Conn {
  n: number;
  closed: boolean;
}

function keeper(maxAgeMs?: number) {
  let opened = 0;
  const keep = new ConnectionKeeper<Conn>(
    (c) => {
      c.closed = true;
    },
    () => {},
    maxAgeMs,
  );
  const take = () =>
    keep.take(
      'k',
      () => Promise.resolve({ n: ++opened, closed: false }),
      (p) => p,
    );
  return { keep, take, opened: () => opened };
}

const sleep = (ms: number) => new Promise((ok) => setTimeout(ok, ms));

describe('ConnectionKeeper', () => {
  it('shares one connection between sends, at once and one after another; a broken one is closed and replaced', async () => {
    const { keep, take, opened } = keeper();
    const [a, b] = await Promise.all([take(), take()]);
    expect(a.conn).toBe(b.conn);
    a.release(false);
    b.release(false);
    const c = await take();
    expect(c.conn).toBe(a.conn);
    c.release(true);
    await vi.waitFor(() => expect(a.conn.closed).toBe(true));
    const d = await take();
    expect(d.conn.n).toBe(2);
    d.release(false);
    expect(opened()).toBe(2);
    await keep.closeAll();
    await vi.waitFor(() => expect(d.conn.closed).toBe(true));
  });

  it('a connection past its age serves no new send: it closes once its last send is done', async () => {
    const { keep, take } = keeper(50);
    const first = await take();
    await sleep(60);
    // in use past its age: the next send gets a new connection, the old one stays open for its user
    const second = await take();
    expect(second.conn).not.toBe(first.conn);
    await sleep(10);
    expect(first.conn.closed).toBe(false);
    first.release(false);
    await vi.waitFor(() => expect(first.conn.closed).toBe(true));
    // unused past its age: replaced and closed at the next take
    second.release(false);
    await sleep(60);
    const third = await take();
    expect(third.conn).not.toBe(second.conn);
    await vi.waitFor(() => expect(second.conn.closed).toBe(true));
    third.release(false);
    await keep.closeAll();
  });
});
