// Starts a real Posthorn (HTTP on 127.0.0.1:0, a fresh database) for a test, and talks to it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startApp, type App, type AppOptions } from '../../src/app.ts';
import { parseConfig, type Config } from '../../src/config.ts';
import { createAccount } from '../../src/operations/accounts.ts';
import { createProject } from '../../src/operations/projects.ts';
import { createLogger } from '../../src/log.ts';
import { freshDatabaseUrl, releaseDatabaseUrl } from './databases.ts';
import { checkMethodData } from './method-data.ts';

export interface TestApp {
  app: App;
  url: string;
  dataDir: string;
  /** POST a JSON body to /v.<version>/<method>[.json] and parse the reply. */
  call(method: string, body: unknown, opts?: { version?: '1.0' | '1.1'; json?: boolean; headers?: Record<string, string> }): Promise<ApiReply>;
  /** POST raw bytes to a path. */
  post(pathname: string, body: string | Uint8Array, headers?: Record<string, string>): Promise<ApiReply>;
  /** A new account and project; keys as the CLI would print them. */
  seed(name?: string): Promise<Seed>;
  close(): Promise<void>;
}

export interface ApiReply {
  status: number;
  headers: Headers;
  body: any;
}

export interface Seed {
  accountKey: string;
  projectKey: string;
  accountUid: string;
  projectUid: string;
  accountId: number;
  projectId: number;
}

export interface TestAppOptions extends AppOptions {
  /** configuration overrides, as flag values would give them */
  config?: Partial<Config>;
}

export async function startTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-test-'));
  const databaseUrl = await freshDatabaseUrl();
  const base = parseConfig(new Map(), {});
  const config = Object.freeze({
    ...base,
    port: 0,
    host: '127.0.0.1',
    data: dataDir,
    databaseUrl,
    mailerHost: 'posthorn.test',
    ehloName: 'posthorn.test',
    bounceDomain: 'bounces.posthorn.test',
    publicUrl: 'http://127.0.0.1:0',
    secretKey: 'test-secret-key',
    // Delivery is off unless a test asks for it (workers > 0), and never resolves through the
    // system's DNS: tests route through a transport map, a relay or a test DNS server.
    workers: 0,
    dnsServers: ['127.0.0.1:9'],
    ...opts.config,
  }) as Config;
  let app: App;
  try {
    app = await startApp(config, { log: opts.log ?? createLogger(process.env.TEST_LOG_LEVEL ?? 'silent'), ...opts });
  } catch (error) {
    await releaseDatabaseUrl(databaseUrl);
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  const url = app.url ?? '';

  async function post(pathname: string, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<ApiReply> {
    const res = await fetch(url + pathname, { method: "POST", body: body as BodyInit, headers });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* leave as text */
    }
    checkMethodData(pathname, res.status, parsed);
    return { status: res.status, headers: res.headers, body: parsed };
  }

  return {
    app,
    url,
    dataDir,
    post,
    call(method, body, callOpts = {}) {
      const version = callOpts.version ?? '1.1';
      const suffix = version === '1.0' || callOpts.json ? '.json' : '';
      return post(`/v.${version}/${method}${suffix}`, JSON.stringify(body), { 'content-type': 'application/json', ...callOpts.headers });
    },
    async seed(name = 'Test') {
      const services = app.services;
      const { account, apiKey: accountKey } = await createAccount(services, { name: `${name} account` });
      const { project, apiKey: projectKey } = await createProject(services, account, { name: `${name} project` });
      return { accountKey, projectKey, accountUid: account.uid, projectUid: project.uid, accountId: account.id, projectId: project.id };
    },
    async close() {
      await app.close();
      await releaseDatabaseUrl(databaseUrl);
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
