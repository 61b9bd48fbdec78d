// Real `node bin/posthorn.js ...` child processes for tests: started with a given environment,
// their pino log lines parsed as they come, stopped (SIGTERM) or killed (SIGKILL) on demand, and
// every one still alive killed by stopAll() so no test leaves a process behind.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';

export const BIN = path.resolve('bin/posthorn.js');

export interface LogLine {
  level?: number;
  msg?: string;
  [field: string]: unknown;
}

export class PosthornProcess {
  readonly lines: LogLine[] = [];
  /** non-JSON output (stderr, stack traces), kept for failure messages */
  readonly text: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private waiters: Array<() => void> = [];
  exitCode: number | null | undefined = undefined;

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    for (const stream of [child.stdout!, child.stderr!]) {
      readline.createInterface({ input: stream }).on('line', (line) => {
        try {
          const parsed = JSON.parse(line) as LogLine;
          if (parsed && typeof parsed === 'object') this.lines.push(parsed);
          else this.text.push(line);
        } catch {
          this.text.push(line);
        }
        this.notify();
      });
    }
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitCode = code;
        this.notify();
        resolve({ code, signal });
      });
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** The first log line matching, waiting for it up to timeoutMs (fails early if the process exits). */
  async waitForLog(match: (line: LogLine) => boolean, what: string, timeoutMs = 60_000): Promise<LogLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.lines.find(match);
      if (found) return found;
      if (this.exitCode !== undefined) throw new Error(`${this.name} exited (${this.exitCode}) before ${what}\n${this.tail()}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${this.name}: timed out waiting for ${what}\n${this.tail()}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 1000));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Waits for the "posthorn is running" line; returns its url (null for a worker). */
  async waitUntilRunning(timeoutMs = 60_000): Promise<{ url: string | null; role: string; background: string[] }> {
    const line = await this.waitForLog((l) => l.msg === 'posthorn is running', 'startup', timeoutMs);
    return { url: (line.url as string | null) ?? null, role: String(line.role), background: (line.background as string[]) ?? [] };
  }

  tail(n = 30): string {
    const out = [...this.lines.map((l) => JSON.stringify(l)), ...this.text];
    return out.slice(-n).join('\n');
  }

  /** SIGTERM and wait for a graceful exit (SIGKILL after timeoutMs). */
  async stop(timeoutMs = 20_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.exitCode === undefined) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  async kill(): Promise<void> {
    if (this.exitCode === undefined) this.child.kill('SIGKILL');
    await this.exited;
  }
}

const running = new Set<PosthornProcess>();

/** Starts `node bin/posthorn.js <args>` with env added to this process's environment. */
export function startPosthorn(name: string, args: string[], env: Record<string, string | undefined>): PosthornProcess {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const proc = new PosthornProcess(name, child);
  running.add(proc);
  void proc.exited.then(() => running.delete(proc));
  return proc;
}

/** What `posthorn init --json` prints of the project it made. */
export interface InitProject {
  api_key: string;
  uid: string;
}

/** Runs `posthorn init --json <args>` with env added (a new installation); returns its project. */
export function initInstallation(args: string[], env: Record<string, string | undefined>): InitProject {
  const init = spawnSync(process.execPath, [BIN, 'init', '--json', ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 });
  assert.equal(init.status, 0, init.stderr);
  return JSON.parse(init.stdout).project;
}

/** Runs `posthorn init --json` with env added (a new installation); returns the project API key. */
export function initProjectKey(env: Record<string, string | undefined>): string {
  return initInstallation([], env).api_key;
}

/** Kills every child still running (test teardown). */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((p) => p.kill()));
}

/**
 * Sends messages `first` .. `first + count - 1` through the API at `apiUrl`, `concurrency` at a
 * time: message i has the uid `${uidPrefix}-${i}` and the one recipient `r${i}@${domain}`. Each
 * must be accepted (200).
 */
export async function sendNumberedMessages(opts: { apiUrl: string; projectKey: string; uidPrefix: string; domain: string; first: number; count: number; concurrency: number }): Promise<void> {
  const { apiUrl, projectKey, uidPrefix, domain, first, count } = opts;
  let next = first;
  await Promise.all(
    Array.from({ length: opts.concurrency }, async () => {
      while (next < first + count) {
        const i = next++;
        const res = await fetch(`${apiUrl}/v.1.1/send_message`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            api_key: projectKey,
            uid: `${uidPrefix}-${i}`,
            arguments: { recipients: `r${i}@${domain}`, headers: { from: 'sender@posthorn.test', subject: `message ${i}` }, content: { 'text/plain': `body ${i}` } },
          }),
        });
        assert.equal(res.status, 200, `send ${i}: ${await res.text()}`);
      }
    }),
  );
}
