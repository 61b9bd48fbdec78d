import { defineMethods } from './types.ts';

export const reportsMethods = defineMethods([]);
