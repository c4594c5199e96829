// Progress on stderr: a redrawn bar on a terminal, plain lines otherwise (logs, pipes, CI), so
// stdout carries only a command's result.

export type Unit = 'bytes' | 'items';

export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(s: string): boolean;
}

const BAR = 28;
/** Plain output prints one line per this many percent. */
const PLAIN_STEP = 25;

function amount(n: number, unit: Unit): string {
  if (unit === 'items') return String(n);
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

export class Progress {
  private readonly tty: boolean;
  private label = '';
  private unit: Unit = 'items';
  private total: number | undefined;
  private done = 0;
  private started = 0;
  private lastDraw = 0;
  private nextPlain = 0;
  private open = false;

  constructor(
    private readonly command: string,
    private readonly out: ProgressStream = process.stderr,
  ) {
    this.tty = out.isTTY === true;
  }

  /** Begins a step; with a total it is measured (a bar), without one it shows the time spent. */
  step(label: string, total?: number, unit: Unit = 'items'): void {
    this.finishLine();
    this.label = label;
    this.total = total;
    this.unit = unit;
    this.done = 0;
    this.started = Date.now();
    this.nextPlain = PLAIN_STEP;
    this.open = true;
    if (this.tty) this.draw(true);
    else
      this.out.write(
        `${this.command}: ${label}${total !== undefined ? ` (${amount(total, unit)}${unit === 'items' ? ' items' : ''})` : ''}\n`,
      );
  }

  update(done: number, total?: number): void {
    if (!this.open) return;
    if (total !== undefined) this.total = total;
    this.done = done;
    if (this.tty) {
      this.draw(false);
      return;
    }
    if (!this.total) return;
    const pct = Math.floor((100 * done) / this.total);
    if (pct >= this.nextPlain && pct < 100) {
      this.out.write(`${this.command}: ${this.label}: ${pct}% (${amount(done, this.unit)} of ${amount(this.total, this.unit)})\n`);
      this.nextPlain = (Math.floor(pct / PLAIN_STEP) + 1) * PLAIN_STEP;
    }
  }

  /** Redraws an unmeasured step on a terminal (its clock). */
  tick(): void {
    if (this.open && this.tty) this.draw(false);
  }

  /** Waits for work of an unmeasured step, its clock running on a terminal. */
  async during<T>(work: Promise<T>): Promise<T> {
    const timer = this.tty ? setInterval(() => this.tick(), 250) : undefined;
    try {
      return await work;
    } finally {
      clearInterval(timer);
    }
  }

  /** Ends the step with a line saying how it ended. */
  end(message: string): void {
    if (this.tty && this.open) this.out.write('\r\x1b[2K');
    this.open = false;
    this.out.write(`${this.command}: ${message}\n`);
  }

  /** A line of its own between steps. */
  note(message: string): void {
    this.finishLine();
    this.out.write(`${this.command}: ${message}\n`);
  }

  private finishLine(): void {
    if (this.tty && this.open) this.out.write('\r\x1b[2K');
    this.open = false;
  }

  private draw(force: boolean): void {
    const now = Date.now();
    if (!force && now - this.lastDraw < 80) return;
    this.lastDraw = now;
    const secs = Math.floor((now - this.started) / 1000);
    const width = (this.out.columns ?? 100) - 1;
    let line: string;
    if (this.total) {
      const frac = Math.min(1, this.done / this.total);
      const figures = ` ${Math.floor(frac * 100)}% ${amount(this.done, this.unit)}/${amount(this.total, this.unit)}`;
      let label = `${this.command}: ${this.label}`;
      // The figures always show; the bar shrinks to make room, then the label.
      const bar = Math.max(10, Math.min(BAR, width - label.length - figures.length - 3));
      const room = width - bar - figures.length - 3;
      if (label.length > room) label = label.slice(0, Math.max(0, room - 1)) + '…';
      const fill = Math.round(frac * bar);
      line = `${label} [${'#'.repeat(fill)}${'-'.repeat(bar - fill)}]${figures}`;
    } else {
      const clock = ` … ${secs}s`;
      let label = `${this.command}: ${this.label}`;
      if (label.length + clock.length > width) label = label.slice(0, Math.max(0, width - clock.length - 1)) + '…';
      line = label + clock;
    }
    if (line.length > width) line = line.slice(0, width);
    this.out.write(`\r\x1b[2K${line}`);
  }
}
