// Fills a project with transmissions quickly: direct SQL into the SQLite file, big transactions,
// prepared statements. This is NOT how mail arrives (that is what the ingest figure measures); it
// only builds the table the history listing has to page through. Rows get their history_seq here
// (1, 2, 3... in write order, exactly what the service's numbering gives them, migration 140); the
// numbering's own cost is measured separately (figure 6n).
import SqliteDatabase from 'better-sqlite3';

export interface SeedResult {
  projectId: number;
  messages: number;
  transmissions: number;
  elapsedMs: number;
}

/**
 * `transmissions` rows over transmissions/perMessage messages of the only project in the file,
 * created_at spread evenly over the last `spreadDays` days (oldest first), all `completed` (so the
 * delivery queue's partial index holds none of them and no worker touches them).
 */
export function seedHistory(file: string, opts: { transmissions: number; perMessage: number; spreadDays: number }): SeedResult {
  const started = performance.now();
  const db = new SqliteDatabase(file);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = OFF');
    const project = db.prepare('SELECT id FROM projects ORDER BY id LIMIT 1').get() as { id: number } | undefined;
    if (!project) throw new Error('no project to seed (did posthorn init run?)');
    const messages = Math.ceil(opts.transmissions / opts.perMessage);
    const now = Date.now();
    const stepMs = (opts.spreadDays * 86_400_000) / messages;
    const payload = JSON.stringify({
      v: 1, messageId: '<seed@bench.local>', from: 'Bench Sender <sender@sender.bench.local>', subject: 'Seeded', text: 'Seeded history row.',
      html: null, headers: {}, variables: {}, attachments: [], recipientOverride: null,
    });
    const insertMessage = db.prepare(
      `INSERT INTO messages (project_id, uid, unique_id, template, subject, from_address, recipient_count, deliver, created_at, payload)
       VALUES (?, ?, ?, NULL, 'Seeded', 'sender@sender.bench.local', ?, 1, ?, ?)`,
    );
    const insertTransmission = db.prepare(
      `INSERT INTO transmissions (message_id, project_id, recipient, status, next_attempt_at, attempts, created_at, updated_at, completed_at, result_code, result_message, history_seq)
       VALUES (?, ?, ?, 'completed', ?, 1, ?, ?, ?, 'SMTP_250', '250 2.0.0 Ok', ?)`,
    );
    const BATCH = 10_000;
    let made = 0;
    const insertBatch = db.transaction((from: number, to: number) => {
      for (let m = from; m < to; m++) {
        const createdAt = Math.round(now - opts.spreadDays * 86_400_000 + m * stepMs);
        const uid = `seed-${m}`;
        const messageId = Number(insertMessage.run(project.id, uid, `${uid}@bench.local`, opts.perMessage, createdAt, payload).lastInsertRowid);
        for (let r = 0; r < opts.perMessage && made < opts.transmissions; r++, made++) {
          insertTransmission.run(messageId, project.id, `rcpt${m}-${r}@bench.local`, createdAt, createdAt, createdAt + 1000, createdAt + 1000, made + 1);
        }
      }
    });
    for (let m = 0; m < messages; m += BATCH) insertBatch(m, Math.min(messages, m + BATCH));
    // No ANALYZE: the service sees the table as a real deployment would (it runs its own, if any).
    db.pragma('wal_checkpoint(TRUNCATE)');
    return { projectId: project.id, messages, transmissions: made, elapsedMs: performance.now() - started };
  } finally {
    db.close();
  }
}

/**
 * Appends `count` transmissions as ingest writes them (history_seq NULL, created now) to the only
 * project, under one existing message; the service numbers them on its next history request.
 */
export function appendUnnumbered(file: string, count: number): void {
  const db = new SqliteDatabase(file);
  try {
    db.pragma('busy_timeout = 10000');
    const row = db.prepare('SELECT id, project_id FROM messages ORDER BY id DESC LIMIT 1').get() as { id: number; project_id: number } | undefined;
    if (!row) throw new Error('no message to append to');
    const insert = db.prepare(
      `INSERT INTO transmissions (message_id, project_id, recipient, status, next_attempt_at, attempts, created_at, updated_at, completed_at, result_code, result_message)
       VALUES (?, ?, ?, 'completed', ?, 1, ?, ?, ?, 'SMTP_250', '250 2.0.0 Ok')`,
    );
    const now = Date.now();
    db.transaction(() => {
      for (let i = 0; i < count; i++) insert.run(row.id, row.project_id, `late${i}@bench.local`, now, now, now, now);
    })();
  } finally {
    db.close();
  }
}
