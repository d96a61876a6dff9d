import { InvalidArgument } from '@dynamo/backend';
import regjsparser, { type AstNode as Node, type CharacterClass, type CharacterClassBody, type RootNode as Root } from 'regjsparser';

import { type CharRange, charClass, literal, repeat } from './text.js';

const DIGIT: CharRange[] = [[0x30, 0x39]];
const WORD: CharRange[] = [
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
];
const SPACE: CharRange[] = [
  [0x09, 0x0d],
  [0x20, 0x20],
];
const ESCAPES: Record<string, { ranges: CharRange[]; negated: boolean }> = {
  d: { ranges: DIGIT, negated: false },
  D: { ranges: DIGIT, negated: true },
  w: { ranges: WORD, negated: false },
  W: { ranges: WORD, negated: true },
  s: { ranges: SPACE, negated: false },
  S: { ranges: SPACE, negated: true },
};
/** What a JSON string may not hold unescaped: the quote, the backslash and control characters. */
/** The regex syntax accepted: Python's named groups and lookbehind parse (and are refused where they cannot be expressed). */
const FEATURES = { namedGroups: true, lookbehind: true } as const;
type AstNode = Node<typeof FEATURES>;
type RootNode = Root<typeof FEATURES>;

const JSON_UNSAFE: CharRange[] = [
  [0x00, 0x1f],
  [0x22, 0x22],
  [0x5c, 0x5c],
];

/** Options of {@link regexToGbnf}. */
export interface RegexOptions {
  /** The match is written inside a JSON string: quotes, backslashes and control characters come out escaped. */
  jsonString?: boolean;
}

/**
 * A GBNF expression matching exactly the strings `pattern` matches in full (as guided decoding
 * reads a regex: `^` and `$` are implied). Lazy quantifiers match the same strings as greedy ones.
 * Throws `InvalidArgument` for what a context-free grammar cannot express: lookaround, back
 * references, word boundaries and anchors inside the pattern.
 */
export function regexToGbnf(pattern: string, options: RegexOptions = {}): string {
  let root: RootNode;
  try {
    // Python spells a named group (?P<name>...); the parser reads JavaScript's (?<name>...).
    root = regjsparser.parse(pattern.replaceAll('(?P<', '(?<'), '', FEATURES);
  } catch (err) {
    throw new InvalidArgument(`guided regex ${JSON.stringify(pattern)} does not parse: ${(err as Error).message}`);
  }
  const emit = new RegexEmitter(pattern, options.jsonString === true);
  return emit.top(root);
}

class RegexEmitter {
  constructor(
    readonly pattern: string,
    readonly json: boolean,
  ) {}

  refuse(what: string): never {
    throw new InvalidArgument(`guided regex ${JSON.stringify(this.pattern)}: ${what} cannot be expressed as a llama.cpp grammar`);
  }

  /** The whole pattern: each top-level alternative may open with `^` and close with `$`. */
  top(root: RootNode): string {
    const alternatives = root.type === 'disjunction' ? root.body : [root];
    return alternatives
      .map((alt) => {
        const body = alt.type === 'alternative' ? [...alt.body] : [alt];
        if (body[0]?.type === 'anchor' && body[0].kind === 'start') body.shift();
        const last = body.at(-1);
        if (last?.type === 'anchor' && last.kind === 'end') body.pop();
        return this.sequence(body);
      })
      .join(' | ');
  }

  sequence(nodes: readonly AstNode[]): string {
    // An empty sequence matches the empty string.
    return nodes.length === 0 ? '""' : nodes.map((n) => this.node(n)).join(' ');
  }

  node(node: AstNode): string {
    switch (node.type) {
      case 'alternative':
        return `(${this.sequence(node.body)})`;
      case 'disjunction':
        return `(${node.body.map((n) => this.node(n)).join(' | ')})`;
      case 'group':
        if (node.behavior !== 'normal' && node.behavior !== 'ignore') this.refuse(node.behavior);
        return `(${this.sequence(node.body)})`;
      case 'quantifier':
        return `(${this.node(node.body[0])})${repeat(node.min, node.max)}`;
      case 'value':
        return this.char(node.codePoint);
      case 'dot':
        return this.cls(
          [
            [0x0a, 0x0a],
            [0x0d, 0x0d],
          ],
          true,
        );
      case 'characterClassEscape': {
        const { ranges, negated } = ESCAPES[node.value]!;
        return this.cls(ranges, negated);
      }
      case 'characterClass':
        return this.characterClass(node);
      case 'anchor':
        return this.refuse(node.kind === 'start' || node.kind === 'end' ? 'an anchor inside the pattern' : 'a word boundary');
      case 'reference':
        return this.refuse('a back reference');
      default:
        return this.refuse(`"${node.raw}"`);
    }
  }

  char(cp: number): string {
    if (this.json && inRanges(cp, JSON_UNSAFE)) return literal(JSON.stringify(String.fromCodePoint(cp)).slice(1, -1));
    return literal(String.fromCodePoint(cp));
  }

  /** A class, kept to what a JSON string may hold unescaped when writing one. */
  cls(ranges: readonly CharRange[], negated: boolean): string {
    if (!this.json) return charClass(ranges, negated);
    if (negated) return charClass([...ranges, ...JSON_UNSAFE], true);
    const safe = subtract(ranges, JSON_UNSAFE);
    return safe.length > 0 ? charClass(safe) : this.refuse('a class of only quotes, backslashes or control characters inside a JSON string');
  }

  characterClass(node: CharacterClass<typeof FEATURES>): string {
    const positive: CharRange[] = [];
    const negatedEscapes: CharRange[][] = [];
    for (const part of node.body as CharacterClassBody[]) {
      if (part.type === 'value') positive.push([part.codePoint, part.codePoint]);
      else if (part.type === 'characterClassRange') positive.push([part.min.codePoint, part.max.codePoint]);
      else if (part.type === 'characterClassEscape') {
        const { ranges, negated } = ESCAPES[part.value]!;
        if (negated) negatedEscapes.push(ranges);
        else positive.push(...ranges);
      } else this.refuse(`"${part.raw}"`);
    }
    if (negatedEscapes.length === 0) return this.cls(positive, node.negative);
    // [\D...] is "not a digit, or ...": an alternation; its complement has no single-class form.
    if (node.negative || negatedEscapes.length > 1) this.refuse(`the class "${node.raw}"`);
    const alternatives = [this.cls(negatedEscapes[0]!, true), ...(positive.length > 0 ? [this.cls(positive, false)] : [])];
    return `(${alternatives.join(' | ')})`;
  }
}

function inRanges(cp: number, ranges: readonly CharRange[]): boolean {
  return ranges.some(([lo, hi]) => cp >= lo && cp <= hi);
}

/** `ranges` without the code points in `remove`. */
function subtract(ranges: readonly CharRange[], remove: readonly CharRange[]): CharRange[] {
  let out: CharRange[] = [...ranges];
  for (const [rlo, rhi] of remove) {
    out = out.flatMap(([lo, hi]): CharRange[] => {
      if (hi < rlo || lo > rhi) return [[lo, hi]];
      const parts: CharRange[] = [];
      if (lo < rlo) parts.push([lo, rlo - 1]);
      if (hi > rhi) parts.push([rhi + 1, hi]);
      return parts;
    });
  }
  return out;
}
