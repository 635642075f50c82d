// Reads the Grafana dashboard's queries (infra/monitoring/grafana-dashboard.json) and the metric names they use (its tests check those
// names against what the processes register and serve).
import { readFileSync } from 'node:fs';

export const DASHBOARD_FILE = new URL('../../../infra/monitoring/grafana-dashboard.json', import.meta.url);

/** Metric names a PromQL expression reads (histogram series map to their family). */
export function queriedMetrics(expr: string): string[] {
  const names = expr.match(/\b(?:rods|process|nodejs)_[a-z0-9_]+\b/g) ?? [];
  return names.map((n) => n.replace(/_(bucket|sum|count)$/, ''));
}

interface Dashboard {
  panels: { title: string; targets?: { expr: string }[] }[];
  templating: { list: { name: string; definition?: string }[] };
}

/** Every query of the dashboard: panel targets and template variables. */
export function dashboardQueries(file: URL = DASHBOARD_FILE): { where: string; expr: string }[] {
  const d = JSON.parse(readFileSync(file, 'utf8')) as Dashboard;
  return [
    ...d.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: p.title, expr: t.expr }))),
    ...d.templating.list
      .filter((v) => v.definition)
      .map((v) => ({ where: `variable ${v.name}`, expr: v.definition! })),
  ];
}
