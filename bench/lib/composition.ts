// Figure 1c of `npm run bench`: the CPU of composing one message, Posthorn's composition (the built
// dist/domain/compose-mime.js, as delivery runs it) beside Nodemailer's own MailComposer build() of
// the same message, alternating in one process. Two messages: the bench's send_message text
// (~1 KB, plain ASCII: 7bit) and an order confirmation of ~16 KB of HTML with its text part (long
// lines, a few characters beyond ASCII: both parts quoted-printable), the usual shape of
// transactional mail. Runs in its own process, so that its JIT and heap hold nothing else:
//   node --import tsx bench/lib/composition.ts MESSAGES RUNS
// prints {"text":{"posthorn":[µs...],"nodemailer":[µs...]},"html":{...}}, CPU µs per message per run.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { BODY_TEXT, ROOT } from './posthorn.ts';

const ROW = (i: number) =>
  `<tr><td style="padding:12px 24px;font-family:Helvetica,Arial,sans-serif;font-size:14px;line-height:20px;color:#333333;">Item ${i}: your order\u2019s item ${i} has shipped \u2014 track it at <a href="https://shop.example.com/orders/123456/items/${i}?utm_source=email&amp;utm_medium=transactional" style="color:#0066cc;">shop.example.com</a>.</td><td style="text-align:right;padding:12px 24px;">\u20ac${(i * 3.5).toFixed(2)}</td></tr>\n`;
/** ~16 KB: a table layout with inline styles, as transactional HTML is written. */
const ORDER_HTML = `<!DOCTYPE html><html><head><meta charset="utf-8"><title>Your order</title></head><body style="margin:0;padding:0;background:#f4f4f4;"><table width="100%" cellpadding="0" cellspacing="0" border="0" style="max-width:600px;margin:0 auto;background:#ffffff;">\n${Array.from({ length: 40 }, (_, i) => ROW(i)).join('')}</table><p style="font-size:11px;color:#999999;">\u00a9 2026 Shop Example Ltd \u00b7 1 Example Street \u00b7 Unsubscribe&nbsp;here</p></body></html>`;
const ORDER_TEXT = ORDER_HTML.replace(/<[^>]+>/g, '');

interface Shape {
  text: string;
  html: string | null;
}
const SHAPES: Record<'text' | 'html', Shape> = { text: { text: BODY_TEXT, html: null }, html: { text: ORDER_TEXT, html: ORDER_HTML } };

type Compose = (n: number) => Promise<unknown>;

async function composers(shape: Shape): Promise<{ posthorn: Compose; nodemailer: Compose }> {
  const { composeMime } = (await import(pathToFileURL(path.join(ROOT, 'dist', 'domain', 'compose-mime.js')).href)) as typeof import('../../src/domain/compose-mime.ts');
  const from = 'Bench Sender <sender@sender.bench.local>';
  // Each message its own Message-ID and subject, as each accepted message has.
  const posthorn: Compose = (n) =>
    composeMime({ v: 1, syntax: 'handlebars', messageId: `<${n}.bench@posthorn.test>`, from, subject: `Benchmark message ${n}`, text: shape.text, html: shape.html, headers: {}, variables: {}, attachments: [], recipientOverride: null }, {}, { date: new Date() });
  const nodemailer: Compose = (n) =>
    new MailComposer({ from, subject: `Benchmark message ${n}`, text: shape.text, html: shape.html ?? undefined, messageId: `<${n}.bench@posthorn.test>`, date: new Date() }).compile().build();
  return { posthorn, nodemailer };
}

/** CPU µs per message of `messages` compositions. */
async function measure(compose: Compose, messages: number): Promise<number> {
  const before = process.cpuUsage();
  for (let n = 0; n < messages; n++) await compose(n);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / messages;
}

async function main(): Promise<void> {
  const messages = Number(process.argv[2] ?? 5000);
  const runs = Number(process.argv[3] ?? 3);
  const out: Record<string, { posthorn: number[]; nodemailer: number[] }> = {};
  for (const [name, shape] of Object.entries(SHAPES)) {
    const { posthorn, nodemailer } = await composers(shape);
    // A warm-up of each, twice, alternating as the runs do: the JIT's work is not the figure.
    for (let i = 0; i < 2; i++) {
      await measure(posthorn, messages);
      await measure(nodemailer, messages);
    }
    out[name] = { posthorn: [], nodemailer: [] };
    for (let i = 0; i < runs; i++) {
      out[name].posthorn.push(await measure(posthorn, messages));
      out[name].nodemailer.push(await measure(nodemailer, messages));
    }
  }
  console.log(JSON.stringify(out));
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) await main();
