// Acceptance on PostgreSQL (docs/decisions/0003-performance.md): the messages accepted in one
// event-loop turn go to the database in ONE statement, as SQLite's group commit puts them in one
// transaction. A send_message is one statement already; under load, each statement's round trip
// (a socket write that wakes a backend, a commit that flushes the WAL) cost more than its rows,
// so a turn's acceptances share them.
//
//   statement ACCEPT_MESSAGES_SQL: every message and every transmission of up to MAX_GROUP
//             messages (MAX_GROUP_COPIES copies), one statement, atomic on its own (no
//             BEGIN/COMMIT); each caller learns its own id, or null when its uid was taken. A turn
//             with one acceptance sends it the same way.
//   taken     ON CONFLICT DO NOTHING: a taken (project_id, uid) inserts nothing for that message,
//             the others of the group are inserted; a uid repeated within a turn is sent after
//             the turn's statements have settled, so the first one wins as it would alone
//   failure   a group that fails for a reason other than the database being away is written
//             again one acceptance at a time: a bad row fails alone, as on SQLite (one savepoint
//             per unit)
//
// The text is a named prepared statement, the same for any count of messages and copies.
import type pg from 'pg';
import type { AcceptedTransmission, MessageRow } from '../schema.ts';
import { MESSAGE_COLUMNS, TRANSMISSION_COLUMNS } from './acceptance-columns.ts';

interface Pending {
  message: MessageRow;
  transmissions: readonly AcceptedTransmission[];
  resolve: (id: number | null) => void;
  reject: (error: unknown) => void;
}

/** Acceptances and copies per statement at most: a turn with more sends several (a message with more copies goes alone). */
const MAX_GROUP = 256;
const MAX_GROUP_COPIES = 10_000;

export class AcceptanceGroups {
  private pending: Pending[] = [];

  constructor(
    private readonly pool: pg.Pool,
    /** how long the statement waits for the server's answer (PostgresOptions.timeoutMs) */
    private readonly timeoutMs: number,
    /** the error a caller sees for a failed statement (the database away: StoreUnavailableError) */
    private readonly translate: (error: unknown) => unknown,
    private readonly isUnavailable: (error: unknown) => boolean,
  ) {}

  /** The message's id, or null when its (project_id, uid) is taken. */
  accept(message: MessageRow, transmissions: readonly AcceptedTransmission[]): Promise<number | null> {
    return new Promise((resolve, reject) => {
      this.pending.push({ message, transmissions, resolve, reject });
      if (this.pending.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const waiting = this.pending;
    this.pending = [];
    this.send(waiting);
  }

  /**
   * Sends the acceptances in statements of at most MAX_GROUP messages and MAX_GROUP_COPIES copies,
   * concurrently over the pool. A uid that appears again is held back until every statement of
   * this pass has settled, so the first acceptance of a uid is the one stored, as it would be alone.
   */
  private send(waiting: readonly Pending[]): void {
    const groups: Pending[][] = [];
    const repeats: Pending[] = [];
    const keys = new Set<string>();
    let group: Pending[] = [];
    let copies = 0;
    for (const p of waiting) {
      const key = `${p.message.project_id}\u0000${p.message.uid}`;
      if (keys.has(key)) {
        repeats.push(p);
        continue;
      }
      keys.add(key);
      if (group.length >= MAX_GROUP || (group.length > 0 && copies + p.transmissions.length > MAX_GROUP_COPIES)) {
        groups.push(group);
        group = [];
        copies = 0;
      }
      group.push(p);
      copies += p.transmissions.length;
    }
    if (group.length > 0) groups.push(group);
    const sent = groups.map((g) => this.write(g));
    // write() settles every caller and never rejects.
    if (repeats.length > 0) void Promise.all(sent).then(() => this.send(repeats));
  }

  private async write(group: readonly Pending[]): Promise<void> {
    let rows: Array<{ id: string | number; ord: string | number }>;
    try {
      rows = (await this.pool.query<{ id: string | number; ord: string | number }>({ name: 'posthorn_accept_messages', text: ACCEPT_MESSAGES_SQL, values: groupValues(group), query_timeout: this.timeoutMs } as pg.QueryConfig)).rows;
    } catch (error) {
      // A group that failed for a reason of its own rows is written again one by one: a bad row fails alone.
      if (group.length > 1 && !this.isUnavailable(error)) {
        await Promise.all(group.map((p) => this.write([p])));
        return;
      }
      const translated = this.translate(error);
      for (const p of group) p.reject(translated);
      return;
    }
    const ids = new Map(rows.map((r) => [Number(r.ord), Number(r.id)]));
    group.forEach((p, i) => p.resolve(ids.get(i + 1) ?? null));
  }
}

/**
 * Many messages and their transmissions: the messages as one array per column (their position,
 * `ord`, from 1), the transmissions likewise with the position of their message. The transmissions
 * of the messages inserted are inserted in the order given; the answer is each inserted
 * message's id with its position.
 */
const ACCEPT_MESSAGES_SQL = `WITH i AS (
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::integer[], $8::integer[], $9::bigint[], $10::bigint[], $11::integer[], $12::text[])
    WITH ORDINALITY AS i(project_id, uid, unique_id, template, subject, from_address, recipient_count, deliver, created_at, send_at, sandbox, payload, ord)
), m AS (
  INSERT INTO messages (project_id, uid, unique_id, template, subject, from_address, recipient_count, deliver, created_at, send_at, sandbox, payload)
  SELECT project_id, uid, unique_id, template, subject, from_address, recipient_count, deliver, created_at, send_at, sandbox, payload FROM i ORDER BY ord
  ON CONFLICT ON CONSTRAINT messages_project_uid DO NOTHING
  RETURNING id, project_id, uid
), mi AS (
  SELECT m.id, i.ord FROM m JOIN i ON i.project_id = m.project_id AND i.uid = m.uid
), t AS (
  INSERT INTO transmissions (message_id, project_id, recipient, recipient_name, variables, subject, status, next_attempt_at, attempts, created_at, updated_at, completed_at, result_code, result_message)
  SELECT mi.id, c.project_id, c.recipient, c.recipient_name, c.variables, c.subject, c.status, c.next_attempt_at, c.attempts, c.created_at, c.updated_at, c.completed_at, c.result_code, c.result_message
  FROM unnest($13::bigint[], $14::bigint[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text[], $20::bigint[], $21::integer[], $22::bigint[], $23::bigint[], $24::bigint[], $25::text[], $26::text[])
    WITH ORDINALITY AS c(message_ord, project_id, recipient, recipient_name, variables, subject, status, next_attempt_at, attempts, created_at, updated_at, completed_at, result_code, result_message, n)
  JOIN mi ON mi.ord = c.message_ord
  ORDER BY c.n
)
SELECT id, ord FROM mi`;

function groupValues(group: readonly Pending[]): unknown[] {
  const messageOrd: number[] = [];
  const copies: AcceptedTransmission[] = [];
  group.forEach((p, i) => {
    for (const t of p.transmissions) {
      messageOrd.push(i + 1);
      copies.push(t);
    }
  });
  return [
    ...MESSAGE_COLUMNS.map((c) => group.map((p) => p.message[c] ?? null)),
    messageOrd,
    ...TRANSMISSION_COLUMNS.map((c) => copies.map((row) => row[c] ?? null)),
  ];
}
