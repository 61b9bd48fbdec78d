import { defineMethods } from './types.ts';

export const sendMethods = defineMethods([]);
