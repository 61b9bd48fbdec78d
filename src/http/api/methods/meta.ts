// Methods about the API itself.
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../../domain/errors.ts';
import { NO_ARGUMENTS } from '../schema.ts';
import { defineMethods, type MethodDef } from './types.ts';

export function metaMethods(all: () => readonly MethodDef[]): MethodDef[] {
  return defineMethods([
    {
      name: 'get_method_list',
      key: 'any',
      summary: 'Names of the methods this key may call, as one comma-separated string.',
      args: NO_ARGUMENTS,
      data: Type.Object({ methods: Type.String({ description: 'method names, sorted, separated by ", "' }) }),
      async run({ caller }) {
        const names = all()
          .filter((m) => m.key === 'any' || m.key === caller.keyKind)
          .map((m) => m.name)
          .sort();
        return { data: { methods: names.join(', ') } };
      },
    },
    {
      name: 'test_error',
      key: 'any',
      summary: 'Always fails with 500 internal_server_error, so clients can test their error path.',
      args: NO_ARGUMENTS,
      // Never: the OpenAPI document declares no 200 for it, only the error answers.
      data: Type.Never({ description: 'never answered: the call always fails' }),
      async run() {
        throw new ApiError('internal_server_error', 'This is a test error: test_error always fails.');
      },
    },
  ]);
}
