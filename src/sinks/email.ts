// E-mail sink (SMTP over implicit TLS) to the screened address; the certificate is verified for the
// URI's host name. Subject and body come from the sink's templates (context: envelope fields at top
// level plus `event`); recipients from the subscription's routing. A 5xx reply is permanent; other
// failures are retried.
// Connections are kept: a nodemailer SMTP pool per destination as prepared for the send (kept.ts:
// screened address, TLS name, trust, credentials, timeout), up to POOL_CONNECTIONS connections that
// each carry up to 100 messages (RSET after a refused message). The pool sends a message again on
// a new connection only when a kept connection closed before a byte of it went out, once
// (maxRequeues); a send cut short by its deadline closes the connection it was on.
import nodemailer from 'nodemailer';
import type { Mail, SendMailOptions, SMTPPoolOptions, SMTPPoolSentMessageInfo } from 'nodemailer';
import addressparser from 'nodemailer/lib/addressparser';
import { badRequest } from '../domain/errors.ts';
import type { Config } from '../config.ts';
import { compileTemplate, MAX_BODY_TEMPLATE, renderTemplate, TemplateError } from '../domain/remote-targets.ts';
import type { ConfigProblem, EventEnvelope, SendInput, SendResult, SinkDefinition, SinkTransport } from './types.ts';
import {
  checkInt,
  checkPayloadSize,
  Deadline,
  DEFAULT_TEMPLATE_LIMITS,
  MAX_PAYLOAD_CAP,
  prepareDestination,
  SinkFailure,
  templateContext,
  toResult,
  uriProblems,
  type UriRules,
} from './uri.ts';
import { templateLimits } from '../domain/templates.ts';
import { ConnectionKeeper, destinationKey, IDLE_MS, type Held } from './kept.ts';

const RULES: UriRules = { scheme: 'smtps', plainScheme: 'smtp', defaultPort: 465, path: 'none', query: [] };
const MAX_SUBJECT_TEMPLATE = 8192;
const MAX_ADDRESS_LENGTH = 998;
const MAX_RECIPIENTS = 100;
const ROUTING_MEMBERS = new Set(['recipients', 'to', 'cc', 'bcc']);
/** Connections a kept pool opens to one destination at most. */
const POOL_CONNECTIONS = 4;

/** What one send carries (also the sink preview payload). */
export interface RenderedMail {
  from: string;
  reply_to: string | null;
  to: string[];
  cc: string[];
  bcc: string[];
  subject: string;
  body: string;
}

/** Null when `value` is one mailbox address (display name allowed), else the problem. */
function addressProblem(value: unknown): string | null {
  if (typeof value !== 'string' || value.trim() === '') return 'must be a non-empty address';
  if (value.length > MAX_ADDRESS_LENGTH || /[\r\n\x00]/.test(value)) return 'must be one line of at most 998 characters';
  const parsed = addressparser(value);
  if (parsed.length !== 1) return 'must be exactly one address';
  const one = parsed[0]!;
  if (one.group !== undefined || !/^[^\s@]+@[^\s@]+$/.test(one.address)) return 'must be an address like name@example.com';
  return null;
}

function templateProblem(source: unknown, key: string, maxLength: number, problems: ConfigProblem[]): void {
  const path = `config.${key}`;
  if (typeof source !== 'string' || source === '') {
    problems.push({ path, message: `${key} is required (a non-empty template)` });
    return;
  }
  if (source.length > maxLength) {
    problems.push({ path, message: `${key} must be at most ${maxLength} characters` });
    return;
  }
  try {
    compileTemplate(source, DEFAULT_TEMPLATE_LIMITS);
  } catch (err) {
    problems.push({ path, message: `${key}: ${(err as Error).message}` });
  }
}

function validateConfig(config: Record<string, unknown>, secretRef: string | null): ConfigProblem[] {
  const problems: ConfigProblem[] = [...uriProblems(config.uri, secretRef, RULES)];
  const from = addressProblem(config.from);
  if (from) problems.push({ path: 'config.from', message: `from ${from}` });
  if (config.reply_to !== undefined && config.reply_to !== null) {
    const replyTo = addressProblem(config.reply_to);
    if (replyTo) problems.push({ path: 'config.reply_to', message: `reply_to ${replyTo}` });
  }
  templateProblem(config.subject_template, 'subject_template', MAX_SUBJECT_TEMPLATE, problems);
  templateProblem(config.body_template, 'body_template', MAX_BODY_TEMPLATE, problems);
  checkInt(config, 'max_payload_bytes', 1, MAX_PAYLOAD_CAP, problems);
  return problems;
}

function validateRouting(routing: Record<string, unknown>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const key of Object.keys(routing)) {
    if (!ROUTING_MEMBERS.has(key)) problems.push({ path: `routing.${key}`, message: `${key} is not a routing member for an email sink` });
  }
  if (routing.recipients !== undefined && routing.to !== undefined) {
    problems.push({ path: 'routing.to', message: 'give recipients or its alias to, not both' });
  }
  const toKey = routing.to !== undefined ? 'to' : 'recipients';
  let total = 0;
  for (const key of [toKey, 'cc', 'bcc']) {
    const list = routing[key];
    if (list === undefined && key !== toKey) continue;
    if (!Array.isArray(list) || (key === toKey && list.length === 0)) {
      problems.push({
        path: `routing.${key}`,
        message: key === toKey ? 'recipients is required (a non-empty array of addresses)' : `${key} must be an array of addresses`,
      });
      continue;
    }
    total += list.length;
    list.forEach((entry, i) => {
      const p = addressProblem(entry);
      if (p) problems.push({ path: `routing.${key}.${i}`, message: `${key}[${i}] ${p}` });
    });
  }
  if (total > MAX_RECIPIENTS)
    problems.push({ path: `routing.${toKey}`, message: `at most ${MAX_RECIPIENTS} addresses in recipients, cc and bcc together` });
  return problems;
}

/** Renders subject and body; a TemplateError names the template member at fault. */
function renderMail(
  sink: SinkDefinition,
  routing: Record<string, unknown>,
  envelope: EventEnvelope,
  purpose: 'event' | 'test',
  config: Config,
): RenderedMail {
  const cfg = sink.config;
  const scope = templateContext(envelope, purpose);
  const limits = templateLimits(config);
  let subject: string;
  let body: string;
  try {
    subject = renderTemplate(String(cfg.subject_template ?? ''), scope, limits).trim();
  } catch (err) {
    throw new MailTemplateError('subject_template', (err as Error).message);
  }
  if (subject === '') throw new MailTemplateError('subject_template', 'the subject rendered empty');
  if (/[\r\n]/.test(subject)) throw new MailTemplateError('subject_template', 'the subject must render one line');
  try {
    body = renderTemplate(String(cfg.body_template ?? ''), scope, limits);
  } catch (err) {
    throw new MailTemplateError('body_template', (err as Error).message);
  }
  if (body.trim() === '') throw new MailTemplateError('body_template', 'the body rendered empty');
  const list = (v: unknown) => (Array.isArray(v) ? v.map(String) : []);
  return {
    from: String(cfg.from),
    reply_to: typeof cfg.reply_to === 'string' ? cfg.reply_to : null,
    to: list(routing.recipients ?? routing.to),
    cc: list(routing.cc),
    bcc: list(routing.bcc),
    subject,
    body,
  };
}

class MailTemplateError extends TemplateError {
  readonly member: string;
  constructor(member: string, message: string) {
    super(`${member}: ${message}`);
    this.member = member;
  }
}

function messageId(mail: RenderedMail, input: SendInput): string {
  const domain = addressparser(mail.from)[0]?.address?.split('@')[1] ?? 'localhost';
  const local = input.purpose === 'test' ? `${input.envelope.event_id}-test-${input.deliveryId}` : input.envelope.event_id;
  return `<${local}@${domain}>`;
}

function smtpFailure(err: unknown): SinkFailure | null {
  const code = (err as { responseCode?: unknown })?.responseCode;
  if (typeof code !== 'number' || code < 400 || code > 599) return null;
  // a refused login is retried like the other transports' auth failures: rotating the secret fixes it
  if ((err as { code?: unknown }).code === 'EAUTH') return new SinkFailure('retry', `the mail server refused the login (${code})`);
  return new SinkFailure(code >= 500 ? 'dead' : 'retry', `the mail server refused the message (${code})`);
}

type Mailer = Mail<SMTPPoolSentMessageInfo, SMTPPoolOptions>;

const pools = new ConnectionKeeper<Mailer>(
  (mailer) => mailer.close(),
  (mailer, drop) => mailer.on('error', drop),
);

async function send(input: SendInput): Promise<SendResult> {
  const { sink } = input;
  const cfg = sink.config;
  const deadline = new Deadline(input.timeoutMs, input.signal);
  let held: Held<Mailer> | undefined;
  // takes the message off its pool (closing the connection it is on) when the deadline ends the attempt
  const cancel = new AbortController();
  try {
    const problems = [...validateConfig(cfg, sink.secret_ref), ...validateRouting(input.routing)];
    if (problems.length) throw new SinkFailure('dead', `the sink configuration is invalid: ${problems[0]!.message}`);
    let mail: RenderedMail;
    try {
      mail = renderMail(sink, input.routing, input.envelope, input.purpose, input.config);
    } catch (err) {
      if (err instanceof TemplateError) throw new SinkFailure('dead', `the e-mail could not be rendered: ${err.message}`);
      throw err;
    }
    checkPayloadSize(Buffer.byteLength(mail.subject) + Buffer.byteLength(mail.body), cfg);
    const dest = await prepareDestination(cfg.uri, sink.secret_ref, input.secret, RULES, input.config, deadline);
    const hasAuth = dest.username !== '' || dest.password !== '';
    // option bags: the optional members are assigned after the literal (eslint.config.js); nodemailer reads them by name
    const smtp: SMTPPoolOptions = {
      pool: true,
      maxConnections: POOL_CONNECTIONS,
      maxMessages: 100,
      maxRequeues: 1,
      // a pool's connection unused as long as the keeper keeps an unused pool says QUIT
      idleTimeout: IDLE_MS,
      host: dest.address.address,
      port: dest.port,
      secure: true,
      tls: dest.tls,
      connectionTimeout: input.timeoutMs,
      greetingTimeout: input.timeoutMs,
      socketTimeout: input.timeoutMs,
      dnsTimeout: input.timeoutMs,
      disableFileAccess: true,
      disableUrlAccess: true,
      logger: false,
      debug: false,
    };
    if (dest.tls.servername) smtp.servername = dest.tls.servername;
    if (hasAuth) smtp.auth = { user: dest.username, pass: dest.password };
    const key = destinationKey('email', dest, [dest.username, dest.password, input.timeoutMs]);
    held = await pools.take(
      key,
      () => Promise.resolve(nodemailer.createTransport(smtp)),
      (p) => deadline.run(p),
    );
    const headers: Record<string, string> = { 'X-Svc-Event-Id': input.envelope.event_id };
    if (input.purpose === 'test') headers['X-Svc-Delivery-Purpose'] = 'test';
    const message: SendMailOptions = {
      from: mail.from,
      to: mail.to,
      cc: mail.cc,
      bcc: mail.bcc,
      subject: mail.subject,
      text: mail.body,
      messageId: messageId(mail, input),
      headers,
      signal: cancel.signal,
    };
    if (mail.reply_to) message.replyTo = mail.reply_to;
    const info = await deadline.run(held.conn.sendMail(message));
    if (!Array.isArray(info.accepted) || info.accepted.length === 0) {
      throw new SinkFailure('dead', 'the mail server accepted none of the recipients');
    }
    return { outcome: 'succeeded' };
  } catch (err) {
    if (err instanceof SinkFailure) return { outcome: err.outcome, error: err.message };
    const reply = smtpFailure(err);
    if (reply) return { outcome: reply.outcome, error: reply.message };
    return toResult(err, 'mail server');
  } finally {
    deadline.clear();
    cancel.abort();
    // the pool looks after its connections (a failed one is closed and not used again)
    held?.release(false);
  }
}

export const emailTransport: SinkTransport = {
  kind: 'email',
  validateConfig,
  validateRouting,
  async render(sink, routing, envelope, purpose, config) {
    try {
      return renderMail(sink, routing, envelope, purpose, config);
    } catch (err) {
      if (err instanceof MailTemplateError) {
        throw badRequest('the sink templates cannot render this event', [{ path: `config.${err.member}`, message: err.message }]);
      }
      throw err;
    }
  },
  send,
  close: () => pools.closeAll(),
};
