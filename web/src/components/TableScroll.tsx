import type { ReactNode } from 'react';

/**
 * The frame of every table that may be wider than its column: the table scrolls sideways inside it,
 * never the page. It is a labelled region that takes the keyboard focus, so the hidden columns can
 * be reached without a pointer even when no cell holds a link or a button.
 */
export function TableScroll({ label, className, children }: { label: string; className?: string; children: ReactNode }) {
  return (
    <div className={className ? `table-wrap ${className}` : 'table-wrap'} role="region" aria-label={label} tabIndex={0}>
      {children}
    </div>
  );
}
