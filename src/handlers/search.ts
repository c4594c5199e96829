import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const searchHandlers = {
  searchPlainText: pending('searchPlainText'),
  searchStructured: pending('searchStructured'),
  searchPlainTextStream: pending('searchPlainTextStream'),
  searchStructuredStream: pending('searchStructuredStream'),
} satisfies Partial<HandlerMap>;
