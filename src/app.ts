// The composition root: opens the store, runs migrations, builds the services every operation
// receives, and starts what this process's role asks for (the HTTP API, the background workers).
import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { ProcessRegistry } from './workers/process-registry.ts';
import type { Config } from './config.ts';
import { systemClock, type Clock } from './domain/clock.ts';
import { SecretBox } from './domain/secret-box.ts';
import { createLogger } from './log.ts';
import { forgetDkimKeys } from './delivery/dkim.ts';
import type { BackgroundService, Ports, Services } from './services.ts';
import { loadSecretKey } from './storage/secret-key.ts';
import { sqliteFileFrom } from './storage/dialects/sqlite.ts';
import { openStore } from './storage/store.ts';
import { parseOutboundUrl, resolveOutboundHost } from './webhooks/url-policy.ts';
import { isPostgresUrl } from './domain/database-url.ts';

export interface AppOptions {
  clock?: Clock;
  log?: Logger;
  /** skip background workers even when the role includes them (tests of the API alone) */
  background?: boolean;
}

export interface App {
  readonly services: Services;
  /** base URL of the HTTP API, when this process serves it */
  readonly url: string | null;
  readonly http: FastifyInstance | null;
  readonly background: readonly BackgroundService[];
  close(): Promise<void>;
}

/** Store + migrations + services, without listening: what CLI commands need. */
export async function openServices(config: Readonly<Config>, opts: AppOptions = {}): Promise<Services> {
  const log = opts.log ?? createLogger(config.logLevel);
  // A process that accepts and does not deliver writes its acceptances from a thread (store.ts openStore).
  const store = await openStore({ ...config, log, acceptanceThread: config.role === 'api' });
  try {
    await store.migrate();
  } catch (error) {
    await store.close();
    throw error;
  }
  const secrets = new SecretBox(loadSecretKey(config));
  const ports: Ports = {
    outboundAddresses: {
      parseUrl: parseOutboundUrl,
      checkHost: (host) => resolveOutboundHost(host, { allowPrivate: config.allowPrivateWebhooks, dnsServers: config.dnsServers }),
    },
    forgetDkimKeys: (accountId) => forgetDkimKeys(services, accountId),
  };
  const services: Services = { store, config, clock: opts.clock ?? systemClock, secrets, log, ports };
  return services;
}

/** Applies pending migrations and closes the store (`posthorn migrate`); returns what was applied. */
export async function migrateDatabase(config: Readonly<Config>, log: Logger): Promise<string[]> {
  const store = await openStore({ ...config, log });
  try {
    return await store.migrate();
  } finally {
    await store.close();
  }
}

export async function startApp(config: Readonly<Config>, opts: AppOptions = {}): Promise<App> {
  const services = await openServices(config, opts);
  let http: FastifyInstance | null = null;
  let url: string | null = null;
  const background: BackgroundService[] = [];
  try {
    if (config.role !== 'api' && opts.background !== false) {
      // The registry first (stopped last): it releases a dead predecessor's claims before any job
      // claims, and every job claims under its id (docs/decisions/0008-lease-runner.md).
      // Loaded by the roles that run them: an API process does not load the SMTP client, the IMAP
      // client or the listeners, a worker process not the HTTP API and the dashboard (less memory
      // per process when `serve` runs one of each, docs/operations.md).
      const { BACKGROUND_FACTORIES } = await import('./background.ts');
      const registry = new ProcessRegistry(services);
      await registry.start();
      background.push(registry);
      for (const factory of BACKGROUND_FACTORIES) {
        const service = factory(services, { workerId: registry.id, liveness: registry });
        if (!service) continue;
        await service.start();
        background.push(service);
      }
      // The process that writes tracking links says once, at start, when readers cannot follow them.
      await warnOfUnreachableTracking(services);
      // The process that works the queue says once, at start, when the database will not tidy it.
      await warnOfMaintenanceOff(services);
    }
    if (config.role !== 'worker') {
      const { buildHttpServer } = await import('./http/server.ts');
      http = await buildHttpServer(services);
      await http.listen({ port: config.port, host: config.host });
      const address = http.server.address();
      const port = typeof address === 'object' && address ? address.port : config.port;
      const host = config.host.includes(':') ? `[${config.host}]` : config.host;
      url = `${config.tlsCert ? 'https' : 'http'}://${host}:${port}`;
    }
  } catch (error) {
    await closeAll(services, http, background);
    throw error;
  }
  let closing: Promise<void> | null = null;
  return {
    services,
    url,
    http,
    background,
    close: () => (closing ??= closeAll(services, http, background)),
  };
}

/**
 * One warning when tracking is on while --public-url names this machine alone (docs/tracking.md):
 * the links and the pixel would point at an address no reader reaches. Only a process with the
 * worker role asks, as it writes the links, so a serve with several processes says it once. A
 * database that cannot answer now only leaves the warning out.
 */
async function warnOfUnreachableTracking(services: Services): Promise<void> {
  const { unreachableTrackingProblem } = await import('./operations/tracking.ts');
  try {
    const problem = await unreachableTrackingProblem(services);
    if (problem) services.log.warn({ public_url: services.config.publicUrl }, problem);
  } catch (error) {
    services.log.debug({ err: error }, 'could not check whether tracking links are reachable');
  }
}

/**
 * One warning when PostgreSQL will not vacuum and analyze the queue's tables by itself
 * (storage/ops-stats.ts maintenanceProblem). As for tracking, only a worker asks, and a database
 * that cannot answer now only leaves the warning out.
 */
async function warnOfMaintenanceOff(services: Services): Promise<void> {
  const { maintenanceProblem } = await import('./storage/ops-stats.ts');
  try {
    const problem = await maintenanceProblem(services.store.db);
    if (problem) services.log.warn(problem);
  } catch (error) {
    services.log.debug({ err: error }, 'could not read the database maintenance settings');
  }
}

async function closeAll(services: Services, http: FastifyInstance | null, background: BackgroundService[]): Promise<void> {
  // Stop taking requests first, then let workers finish what they hold, then close the store.
  await http?.close();
  for (const service of [...background].reverse()) {
    try {
      await service.stop();
    } catch (error) {
      services.log.error({ err: error, service: service.name }, 'background service failed to stop cleanly');
    }
  }
  await services.store.close();
}

/**
 * Whether the configured database exists yet. Read-only commands (account list) ask first, so they
 * never create a SQLite file; a PostgreSQL database always exists (Posthorn never creates one).
 */
export function databaseExists(config: Readonly<Config>): boolean {
  if (isPostgresUrl(config.databaseUrl)) return true;
  const file = sqliteFileFrom(config.databaseUrl, config.data);
  return file !== ':memory:' && fs.existsSync(file);
}
