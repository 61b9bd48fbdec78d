// Suppressions compare addresses case-insensitively, the local part included (docs/domains-and-bounces.md,
// "Suppression rules"): `address` holds an entry's key (domain/suppression-policy.ts suppressionKey,
// the normal form lower-cased) and the new `display_address` the spelling it was first stored with,
// which the API and the dashboard show. Rows written before hold that spelling in `address`: each
// is given its key here. Entries of one project whose spellings now share a key become one: the
// entry that blocks most (`rejected` over `warning`, of two warnings the one blocking longer, else
// the older), with its own spelling; the soft-failure counts of such spellings are added up.
//
// During a rolling upgrade a process of the previous version still writes an address as spelled:
// such a row (display_address null) is found by such processes only (docs/operations.md, "Migrations").
import type { Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';
import { suppressionKey } from '../../domain/suppression-policy.ts';

const BATCH = 1000;

interface Entry {
  id: number;
  status: string;
  blocked_until: number | null;
}

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  await db.schema.alterTable('suppressions').addColumn('display_address', d.textType).execute();
  await db.updateTable('suppressions').set((eb) => ({ display_address: eb.ref('address') })).execute();
  await forEachRespelled(db, 'suppressions', async (row, key) => {
    const holder: Entry | undefined = await db
      .selectFrom('suppressions')
      .select(['id', 'status', 'blocked_until'])
      .where('project_id', '=', row.project_id)
      .where('address', '=', key)
      .executeTakeFirst();
    if (holder && blocksMore(holder, row)) {
      await db.deleteFrom('suppressions').where('id', '=', row.id).execute();
      return;
    }
    if (holder) await db.deleteFrom('suppressions').where('id', '=', holder.id).execute();
    await db.updateTable('suppressions').set({ address: key }).where('id', '=', row.id).execute();
  });
  await forEachRespelled(db, 'soft_bounces', async (row, key) => {
    const holder = await db
      .selectFrom('soft_bounces')
      .selectAll()
      .where('project_id', '=', row.project_id)
      .where('address', '=', key)
      .executeTakeFirst();
    if (!holder) {
      await db.updateTable('soft_bounces').set({ address: key }).where('id', '=', row.id).execute();
      return;
    }
    const own = await db.selectFrom('soft_bounces').selectAll().where('id', '=', row.id).executeTakeFirstOrThrow();
    const latest = Number(own.last_failure_at) > Number(holder.last_failure_at) ? own : holder;
    await db
      .updateTable('soft_bounces')
      .set({
        failures: Number(holder.failures) + Number(own.failures),
        first_failure_at: Math.min(Number(holder.first_failure_at), Number(own.first_failure_at)),
        last_failure_at: Number(latest.last_failure_at),
        last_transmission_id: latest.last_transmission_id,
      })
      .where('id', '=', holder.id)
      .execute();
    await db.deleteFrom('soft_bounces').where('id', '=', row.id).execute();
  });
}

/**
 * Calls `respell` for each row of `table` whose address is not its key, in id order. A row it
 * deletes is either that row or one already in key form, which this walk passes over.
 */
async function forEachRespelled(
  db: Kysely<any>,
  table: 'suppressions' | 'soft_bounces',
  respell: (row: Entry & { project_id: number }, key: string) => Promise<void>,
): Promise<void> {
  let afterId = 0;
  for (;;) {
    const rows: Array<Entry & { project_id: number; address: string }> = await db
      .selectFrom(table)
      .select(table === 'suppressions' ? ['id', 'project_id', 'address', 'status', 'blocked_until'] : ['id', 'project_id', 'address'])
      .where('id', '>', afterId)
      .orderBy('id')
      .limit(BATCH)
      .execute();
    if (rows.length === 0) return;
    for (const row of rows) {
      const key = suppressionKey(row.address);
      if (key !== row.address) await respell({ ...row, id: Number(row.id), project_id: Number(row.project_id) }, key);
    }
    afterId = Number(rows[rows.length - 1].id);
  }
}

/** Whether entry `a` blocks more than entry `b`: `rejected` over `warning`, then the later block, then the older entry. */
function blocksMore(a: Entry, b: Entry): boolean {
  const rank = (e: Entry) => (e.status === 'rejected' ? 1 : 0);
  if (rank(a) !== rank(b)) return rank(a) > rank(b);
  const until = (e: Entry) => (e.blocked_until === null ? Number.POSITIVE_INFINITY : Number(e.blocked_until));
  if (until(a) !== until(b)) return until(a) > until(b);
  return Number(a.id) < Number(b.id);
}
