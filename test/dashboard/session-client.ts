// A minimal browser-like HTTP client for dashboard tests: keeps cookies, never follows redirects,
// reads the CSRF token off the last page. Used where a real browser adds nothing (status codes,
// headers, escaping in the HTML source).
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
    const m = /name="_csrf" value="([^"]+)"/.exec(text);
    if (m) this.csrf = m[1];
    return { status: res.status, headers: res.headers, text };
  }

  /** A form post; the session's CSRF token is added unless `csrf: false`. */
  async post(path: string, form: Record<string, string | string[]>, opts: { csrf?: boolean } = {}): Promise<PageReply> {
    const body = new URLSearchParams();
    for (const [k, v] of Object.entries(form)) for (const one of Array.isArray(v) ? v : [v]) body.append(k, one);
    if (opts.csrf !== false && !('_csrf' in form)) body.set('_csrf', this.csrf);
    const res = await fetch(this.base + path, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: this.cookieHeader(), 'content-type': 'application/x-www-form-urlencoded' },
      body,
    });
    this.keep(res);
    return { status: res.status, headers: res.headers, text: await res.text() };
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
