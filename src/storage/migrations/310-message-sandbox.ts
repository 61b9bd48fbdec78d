// messages.sandbox: whether the message was accepted in sandbox mode (docs/sandbox.md), fixed at
// acceptance from its project's `sandbox` setting: 1 when its copies are answered by the sandbox
// adapter instead of SMTP, 0 when they are really sent. Delivery reads this, never the project's
// setting, so switching the setting changes only the messages accepted after the switch.
//
// Rows stored before had no such record; their delivery read the project's setting at each
// attempt. They take the project's setting as it is now, when this migration runs: the mode they
// would have been delivered in had nothing changed since.
import type { Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, _d: StoreDialect): Promise<void> {
  await db.schema
    .alterTable('messages')
    .addColumn('sandbox', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  const projects: Array<{ id: number; settings: string }> = await db.selectFrom('projects').select(['id', 'settings']).execute();
  const sandboxed = projects.filter((p) => sandboxSetting(p.settings)).map((p) => Number(p.id));
  // One statement per sandbox project (a handful); the others keep the default.
  for (const id of sandboxed) await db.updateTable('messages').set({ sandbox: 1 }).where('project_id', '=', id).execute();
}

/** As operations/projects.ts readProjectSettings reads it: true only for a JSON `true`. */
function sandboxSetting(settings: string): boolean {
  try {
    const parsed = JSON.parse(settings) as unknown;
    return typeof parsed === 'object' && parsed !== null && (parsed as Record<string, unknown>).sandbox === true;
  } catch {
    return false;
  }
}
