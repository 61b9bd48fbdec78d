// A minimal browser-like HTTP client for dashboard tests: keeps cookies, never follows redirects,
// reads the CSRF token off the last page and keeps the one-time form tokens of the pages it was
// shown (each post takes one, as a form a page rendered would carry its own; docs/dashboard.md,
// "Forms"). Used where a real browser adds nothing (status codes, headers, escaping in the HTML
// source).
import { createUser } from '../../src/operations/users.ts';
import type { TestApp } from '../helpers/app.ts';

export interface PageReply {
  status: number;
  headers: Headers;
  text: string;
}

export class SessionClient {
  readonly cookies = new Map<string, string>();
  csrf = '';
  /** one-time form tokens of the pages seen and not yet sent, newest last */
  readonly formTokens: string[] = [];
  /** the last post as sent, for resubmit() */
  private lastPost: { path: string; body: URLSearchParams } | null = null;
  constructor(readonly base: string) {}

  private cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  private keep(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (value === '' || /Max-Age=0|Expires=Thu, 01 Jan 1970/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  async get(path: string): Promise<PageReply> {
    const res = await fetch(this.base + path, { redirect: 'manual', headers: { cookie: this.cookieHeader() } });
    this.keep(res);
    const text = await res.text();
    this.read(text);
    return { status: res.status, headers: res.headers, text };
  }

  private read(text: string): void {
    const m = /name="_csrf" value="([^"]+)"/.exec(text);
    if (m) this.csrf = m[1];
    for (const f of text.matchAll(/name="_form" value="([^"]+)"/g)) this.formTokens.push(f[1]);
  }

  /**
   * A form post; the sign-in's CSRF token is added unless `csrf: false`, and a one-time form token
   * of a page seen unless the form names one or `formToken: false`.
   */
  async post(path: string, form: Record<string, string | string[]>, opts: { csrf?: boolean; formToken?: boolean } = {}): Promise<PageReply> {
    const body = new URLSearchParams();
    for (const [k, v] of Object.entries(form)) for (const one of Array.isArray(v) ? v : [v]) body.append(k, one);
    if (opts.csrf !== false && !('_csrf' in form)) body.set('_csrf', this.csrf);
    if (opts.formToken !== false && !('_form' in form) && this.formTokens.length > 0) body.set('_form', this.formTokens.pop()!);
    return this.send(path, body);
  }

  /** The last post sent again exactly as it was, as a browser does on a reload of the page it answered. */
  async resubmit(): Promise<PageReply> {
    if (!this.lastPost) throw new Error('nothing was posted yet');
    return this.send(this.lastPost.path, this.lastPost.body);
  }

  private async send(path: string, body: URLSearchParams): Promise<PageReply> {
    this.lastPost = { path, body };
    const res = await fetch(this.base + path, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: this.cookieHeader(), 'content-type': 'application/x-www-form-urlencoded' },
      body,
    });
    this.keep(res);
    const text = await res.text();
    this.read(text);
    return { status: res.status, headers: res.headers, text };
  }

  async signIn(email: string, password: string): Promise<PageReply> {
    await this.get('/login');
    return this.post('/login', { email, password });
  }
}

/** A dashboard user of the seeded account (optionally of one project) and a client signed in as it. */
export async function signedInClient(t: TestApp, accountUid: string, opts: { email?: string; projectUid?: string } = {}): Promise<{ client: SessionClient; email: string; password: string }> {
  const email = opts.email ?? `user-${Math.random().toString(36).slice(2)}@example.test`;
  const { password } = await createUser(t.app.services, { accountUid, email, projectUid: opts.projectUid ?? null });
  const client = new SessionClient(t.url);
  const r = await client.signIn(email, password);
  if (r.status !== 303) throw new Error(`sign-in answered ${r.status}: ${r.text.slice(0, 300)}`);
  await client.get('/');
  return { client, email, password };
}
