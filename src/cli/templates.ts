// template: list a project's templates, push templates from files, render a preview (docs/cli.md).
//
// push reads files named <slug>.<part>: .html (HTML body), .txt (text body), .css, and .json for
// the other fields ({"name", "subject", "from", "parent"}); the parts of one slug make one template,
// created or updated (parts not given keep their value on update).
import fs from 'node:fs';
import path from 'node:path';
import { unhandled } from './command-args.ts';
import { print, withServices } from './output.ts';
import { accountCaller, isoTime, resolveProject, table } from './scope.ts';
import { SWITCH, TEXT, UsageError, type CliCommand, type CommandInput } from './types.ts';
import type { TemplateInput } from '../operations/templates.ts';

const PARTS: Record<string, keyof TemplateInput> = { '.html': 'html', '.htm': 'html', '.txt': 'text', '.text': 'text', '.css': 'css' };

/** The templates the files describe, by slug. */
export function readTemplateFiles(files: readonly string[]): Map<string, TemplateInput> {
  const out = new Map<string, TemplateInput>();
  for (const file of files) {
    const ext = path.extname(file).toLowerCase();
    const slug = path.basename(file, path.extname(file));
    const input = out.get(slug) ?? {};
    const text = fs.readFileSync(file, 'utf8');
    if (ext === '.json') {
      let fields: unknown;
      try {
        fields = JSON.parse(text);
      } catch (error) {
        throw new UsageError(`${file}: not JSON (${(error as Error).message})`);
      }
      if (!fields || typeof fields !== 'object' || Array.isArray(fields)) throw new UsageError(`${file}: expected a JSON object`);
      for (const key of ['name', 'subject', 'from', 'parent'] as const) {
        const v = (fields as Record<string, unknown>)[key];
        if (v === undefined) continue;
        if (typeof v !== 'string') throw new UsageError(`${file}: "${key}" must be a string`);
        input[key] = v;
      }
    } else if (PARTS[ext]) {
      input[PARTS[ext]] = text;
    } else {
      throw new UsageError(`${file}: unknown part ${ext || '(no extension)'}; expected .html, .txt, .css or .json`);
    }
    out.set(slug, input);
  }
  return out;
}

async function template({ config, args, flags }: CommandInput): Promise<number> {
  const [sub, ...rest] = args;
  const json = flags.bool('json');
  const ops = await import('../operations/templates.ts');
  switch (sub) {
    case 'list':
      return withServices(config, async (services) => {
        const { account, project } = await resolveProject(services, flags);
        const { templates } = await ops.listTemplates(services, { caller: accountCaller(account), projectUid: project.uid });
        const out = templates.map((t) => ({ slug: t.slug, name: t.name, subject: t.subject, parent: t.parent_slug, updated_at: isoTime(t.updated_at) }));
        print(json, out, table(['SLUG', 'PARENT', 'SUBJECT'], out.map((t) => [t.slug, t.parent, t.subject]), '(no templates)'));
        return 0;
      });
    case 'push': {
      // The files are read (and their parts checked) before the database is opened.
      const bySlug = readTemplateFiles(rest);
      return withServices(config, async (services) => {
        const { account, project } = await resolveProject(services, flags);
        const target = { caller: accountCaller(account), projectUid: project.uid };
        const out: Array<{ slug: string; action: 'created' | 'updated' }> = [];
        for (const [slug, input] of bySlug) {
          const exists = await ops.getTemplate(services, target, slug).then(
            () => true,
            () => false,
          );
          if (exists) await ops.updateTemplate(services, target, slug, input);
          else await ops.createTemplate(services, target, slug, input);
          out.push({ slug, action: exists ? 'updated' : 'created' });
          if (!json) process.stderr.write(`${exists ? 'updated' : 'created'} ${slug}\n`);
        }
        print(json, out, `${out.length} template(s) pushed to project ${project.uid}`);
        return 0;
      });
    }
    case 'render': {
      const slug = rest[0];
      const variables = flags.object('variables') ?? {};
      const { previewTemplateFor } = await import('../operations/template-preview.ts');
      return withServices(config, async (services) => {
        const { account, project } = await resolveProject(services, flags);
        const preview = await previewTemplateFor(services, accountCaller(account), project.uid, { slug, variables });
        const text = [
          `Subject: ${preview.subject ?? ''}`,
          `From: ${preview.from ?? ''}`,
          '',
          '--- text ---',
          preview.text ?? '(none)',
          '--- html ---',
          preview.html ?? '(none)',
          ...(preview.missing.length ? [`(no value for: ${preview.missing.join(', ')})`] : []),
          ...Object.entries(preview.errors).map(([k, v]) => `error in ${k}: ${v}`),
        ].join('\n');
        print(json, preview, text);
        return Object.keys(preview.errors).length === 0 ? 0 : 1;
      });
    }
    default:
      return unhandled(sub);
  }
}

export const templateCommands: CliCommand[] = [
  {
    name: 'template',
    usage: [
      'template list [--project UID] [--account UID] [--json]',
      'template push FILE... [--project UID] [--json]   files <slug>.html, .txt, .css, .json',
      'template render SLUG [--variables JSON] [--project UID] [--json]',
    ],
    description: 'Templates of a project. push creates or updates one template per slug from its files; render prints a preview with sample variables.',
    flags: { json: SWITCH, account: TEXT, project: TEXT, variables: { kind: 'json-object' } },
    subcommands: { list: {}, push: { args: ['FILE...'] }, render: { args: ['SLUG'] } },
    run: template,
  },
];
