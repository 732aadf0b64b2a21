import type { FastifyInstance } from 'fastify';
import { prototypeKeyPath } from '../lib/json';
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
 * exactly Fastify's; json-body.test.ts checks that on generated bodies. For a poisoned key it notes
 * which key it was, so the hook server's 400 can name it (http/errors.ts).
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
  const fastifyParse = app.getDefaultJsonParser('error', 'error');
  // Fastify's parser and answer; a refused prototype key is noted on the error for the 400 to name.
  const secureParse: typeof fastifyParse = (request, text, done) =>
    fastifyParse(request, text, (err, parsed) => {
      if (err) noteRefusedKey(err, text);
      return done(err, parsed);
    });
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

const refusedKeys = new WeakMap<Error, string[]>();

/**
 * Notes, for an error of Fastify's parser, the prototype key that made it refuse the body (when
 * that is why): JSON.parse itself is safe with such keys (it defines them as own members); only
 * later assignments are not.
 */
function noteRefusedKey(err: Error, text: string): void {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return; // not JSON: Fastify's error says so
  }
  const path = prototypeKeyPath(parsed);
  if (path !== undefined) refusedKeys.set(err, path.map(String));
}

/** The key path noted by the body parser for a body it refused for a prototype key (http/errors.ts names it). */
export function refusedKeyOf(err: Error): string[] | undefined {
  return refusedKeys.get(err);
}
