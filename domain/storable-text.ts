// Text PostgreSQL can store: the gateway refuses other strings with a 422, the aggregator
// dead-letters records carrying them (they would fail every transaction they reach).

const hex = (c: number) => `U+${c.toString(16).toUpperCase().padStart(4, '0')}`;

/**
 * What makes a string unfit to be stored, or null: a control character (U+0000-U+001F, U+007F;
 * PostgreSQL refuses U+0000 in text and jsonb) or a lone surrogate (jsonb refuses it, text would
 * silently hold U+FFFD instead). `controls: false` only looks for what PostgreSQL cannot store.
 */
export function unstorableCharacter(s: string, opts: { controls?: boolean } = {}): string | null {
  const controls = opts.controls ?? true;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0 || (controls && (c <= 0x1f || c === 0x7f)))
      return `contains the control character ${hex(c)} at index ${i}`;
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = s.charCodeAt(i + 1);
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) i++;
      else return `contains a lone surrogate ${hex(c)} at index ${i}`;
    }
  }
  return null;
}
