import { defineMethods } from './types.ts';

export const accountMethods = defineMethods([]);
