// A project's default From and its sample template's From are no longer written when the project
// is made: a message that names no From goes from noreply@<--mailer-host> as configured when it is
// accepted (operations/projects.ts defaultFromOf), so `posthorn init` run before --mailer-host was
// set no longer leaves a From on the machine's own name. This clears what creation wrote and
// nobody changed since, so those projects follow the configured host too; a value a user set is
// kept as it is:
//
// - projects.settings exactly as createProject wrote it, {"default_from":"noreply@HOST"}: any
//   update_project writes every setting, so settings of that one key were never changed;
// - sample_child_template's From exactly as the sample was made, "Posthorn Sample <sample@HOST>",
//   on a template never updated since (updated_at = created_at).
import type { Kysely } from 'kysely';

const GENERATED_SETTINGS = /^\{"default_from":"noreply@[^"\\\s@]+"\}$/;
const GENERATED_SAMPLE_FROM = /^Posthorn Sample <sample@[^<>\s@]+>$/;

export async function up(db: Kysely<any>): Promise<void> {
  const projects: Array<{ id: number; settings: string }> = await db
    .selectFrom('projects')
    .select(['id', 'settings'])
    .where('settings', 'like', '{"default_from":"noreply@%')
    .execute();
  for (const project of projects) {
    if (!GENERATED_SETTINGS.test(project.settings)) continue;
    await db.updateTable('projects').set({ settings: '{}' }).where('id', '=', project.id).where('settings', '=', project.settings).execute();
  }
  const samples: Array<{ id: number; from_address: string; created_at: number; updated_at: number }> = await db
    .selectFrom('templates')
    .select(['id', 'from_address', 'created_at', 'updated_at'])
    .where('slug', '=', 'sample_child_template')
    .where('from_address', 'like', 'Posthorn Sample <sample@%')
    .execute();
  for (const sample of samples) {
    if (Number(sample.updated_at) !== Number(sample.created_at) || !GENERATED_SAMPLE_FROM.test(sample.from_address)) continue;
    await db.updateTable('templates').set({ from_address: null }).where('id', '=', sample.id).execute();
  }
}
