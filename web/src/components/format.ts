/** How the dashboard writes dates, rates and time zones, the same on every page. */

/** The reader's time zone: charts bucket by it and date fields are entered in it. */
export const READER_TIME_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

/** An instant on the reader's clock, in their locale; a dash for none. */
export function formatDate(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

/** A fraction (0.125) as a percentage ("12.5 %"); small rates such as complaints want more digits. */
export function formatPercent(fraction: number, maximumFractionDigits = 1): string {
  return `${(fraction * 100).toLocaleString(undefined, { maximumFractionDigits })} %`;
}
