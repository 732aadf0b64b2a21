import type { FastifyInstance } from 'fastify';
import { parseWithoutManagedFields } from './managed-fields';

/**
 * Fastify's JSON body parser with the same protection against prototype poisoning, made cheaper.
 *
 * Fastify parses with secure-json-parse, which after JSON.parse tests the whole text against two
 * regular expressions looking for a `"__proto__":` or `"constructor":` key, each letter either
 * literal or a `\u00XX` escape: two more passes over every sync request, costly next to JSON.parse
 * itself (docs/benchmarks.md).
 *
 * What they reject is narrower than what they look for: an object with an own `__proto__` key, or
 * a `constructor` key whose value is an object with an own `prototype` key (a bare `constructor`
 * key passes). Either needs a `__proto__` or `prototype` key, spelt literally or with an escape of
 * one of its letters: `_` is `\u005f`, and every letter of both words is `\u006X` or `\u007X`.
 * One scan of the text for either word or such an escape therefore proves most bodies innocent
 * (a port's `protocol` is neither word); the HTML escapes Kubernetes' Go JSON encoder writes
 * (`\u003c`, `\u003e`, `\u0026`) do not match. Any body it cannot clear goes to Fastify's own
 * parser, so answers and errors (400 for bad JSON, for a poisoned key, for an empty body) are
 * exactly Fastify's; json-body.test.ts checks that on generated bodies.
 *
 * A body it clears is parsed without the managed fields of the request's objects where it can be
 * (./managed-fields.ts): Fastify's values, less fields the hooks never read, and the same errors.
 */
export function mayHidePrototypeKeys(text: string): boolean {
  return SUSPECT.test(text);
}

// One regular expression rather than a search for `proto` and another for the escape: one pass
// over the body instead of two (docs/benchmarks.md).
const SUSPECT = /prototype|__proto__|\\u00[5-7]/;

export function installJsonBodyParser(app: FastifyInstance): void {
  const secureParse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    if (text.length === 0 || mayHidePrototypeKeys(text)) return secureParse(request, text, done);
    let parsed = parseWithoutManagedFields(text);
    if (parsed === undefined) {
      try {
        parsed = JSON.parse(text);
      } catch {
        // Bad JSON, or a byte-order mark Fastify's parser strips: its answer, whatever it is.
        return secureParse(request, text, done);
      }
    }
    return done(null, parsed);
  });
}
