// Tiny DOM helpers: elements from text only (never HTML strings), so task text cannot inject markup.

type Child = Node | string;

export function el(tag: string, attrs: Record<string, string> = {}, ...children: Child[]): HTMLElement {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

/** The first 12 hex digits of a hash (what the lineage shows; the title has all of it). */
export function short(hash: string | null | undefined): string {
  if (!hash) return '-';
  return hash.replace(/^sha256:/, '').slice(0, 12);
}

export function fmtMs(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}
