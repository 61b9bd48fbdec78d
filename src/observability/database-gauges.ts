// Gauges read from the database at scrape time: the delivery queue, the outbound queue, mailbox
// sessions and the connection pool. One load serves every gauge of a scrape and is reused for
// CACHE_MS, so several Prometheus servers (or a dashboard refreshing) cost one set of queries
// every few seconds whatever the scrape rate; a failed load leaves the gauges at their last values
// and sets posthorn_database_up to 0 instead of failing the scrape.
import client from 'prom-client';
import type { Services } from '../services.ts';
import { readMailboxStats, readOutboundQueueStats, readTransmissionQueueStats } from '../storage/ops-stats.ts';
import { PING_TIMEOUT_MS, withTimeout } from './readiness.ts';

/** How long one load of the database figures serves scrapes. */
export const CACHE_MS = 5000;

/** What a dialect may tell about its pool (PostgreSQL); absent where there is one connection. */
interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

export function addDatabaseGauges(registry: client.Registry, services: Services): void {
  const registers = [registry];
  // The same figures in every process of a service: aggregated over several API processes
  // (serve --api-processes, metrics.ts render), the figure once, not a sum; up only if all are.
  const aggregator = 'max' as const;
  let loaded: { at: number; done: Promise<void> } | null = null;

  const transmissions = new client.Gauge({ name: 'posthorn_transmissions', help: 'Live transmissions (the delivery queue) by status: queued, retry; leased: held by a worker now.', labelNames: ['state'] as const, registers, aggregator });
  const due = new client.Gauge({ name: 'posthorn_transmissions_due', help: 'Transmissions that may be claimed now.', registers, aggregator });
  const oldestDue = new client.Gauge({ name: 'posthorn_transmissions_oldest_due_age_seconds', help: 'How long the longest-waiting due transmission has been due (0 when none is).', registers, aggregator });
  const outbound = new client.Gauge({ name: 'posthorn_outbound_requests_pending', help: 'Webhook and postback requests not yet delivered nor given up.', registers, aggregator });
  const outboundDue = new client.Gauge({ name: 'posthorn_outbound_requests_due', help: 'Pending webhook and postback requests whose due time has come.', registers, aggregator });
  const outboundAge = new client.Gauge({ name: 'posthorn_outbound_requests_oldest_pending_age_seconds', help: 'Age of the oldest pending webhook or postback request (0 when none is).', registers, aggregator });
  const mailboxes = new client.Gauge({ name: 'posthorn_mailboxes', help: 'Watched IMAP mailboxes by status (active, auth_failed, error).', labelNames: ['status'] as const, registers, aggregator });
  const sessions = new client.Gauge({ name: 'posthorn_mailbox_sessions', help: 'Mailboxes a watcher holds a session on now.', registers, aggregator });
  const up = new client.Gauge({ name: 'posthorn_database_up', help: '1 when the last load of the database gauges succeeded and the database takes writes (after a write failed as unavailable, a write is tried), else 0.', registers, aggregator: 'min' });
  const pool = new client.Gauge({ name: 'posthorn_db_pool_connections', help: 'Connections of the database pool by state (total, idle, waiting clients), summed over the processes of a supervised serve; PostgreSQL only.', labelNames: ['state'] as const, registers });

  const load = async (): Promise<void> => {
    const db = services.store.db;
    const now = services.clock.now();
    try {
      // Bounded like the readiness ping: a database that does not answer must not hold the scrape.
      const [t, o, m] = await withTimeout(
        Promise.all([readTransmissionQueueStats(db, now), readOutboundQueueStats(db, now), readMailboxStats(db, now)]),
        PING_TIMEOUT_MS,
        'the database',
      );
      for (const [status, n] of Object.entries(t.byStatus)) transmissions.set({ state: status }, n);
      transmissions.set({ state: 'leased' }, t.leased);
      due.set(t.due);
      oldestDue.set(t.oldestDueAt === null ? 0 : Math.max(0, (now - t.oldestDueAt) / 1000));
      outbound.set(o.pending);
      outboundDue.set(o.due);
      outboundAge.set(o.oldestPendingAt === null ? 0 : Math.max(0, (now - o.oldestPendingAt) / 1000));
      for (const [status, n] of Object.entries(m.byStatus)) mailboxes.set({ status }, n);
      sessions.set(m.inSession);
      // Up means it can write too (readiness.ts): a full disk or a write lock held elsewhere
      // answers reads and fails every write.
      const cannotWrite = await withTimeout(services.store.checkWritable(), PING_TIMEOUT_MS, 'a write to the database');
      up.set(cannotWrite ? 0 : 1);
    } catch (error) {
      up.set(0);
      services.log.warn({ err: error }, 'reading the database gauges failed');
    }
    const stats: PoolStats | undefined = services.store.poolStats();
    if (stats) for (const state of ['total', 'idle', 'waiting'] as const) pool.set({ state }, stats[state]);
  };

  // Registered as the collect() of one gauge: prom-client awaits every collect before rendering,
  // and the others read what this load set.
  const refresh = async (): Promise<void> => {
    const now = Date.now();
    if (!loaded || now - loaded.at >= CACHE_MS) loaded = { at: now, done: load() };
    await loaded.done;
  };
  for (const gauge of [transmissions, due, oldestDue, outbound, outboundDue, outboundAge, mailboxes, sessions, up, pool]) {
    (gauge as unknown as { collect: () => Promise<void> }).collect = refresh;
  }
}
