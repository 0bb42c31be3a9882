import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useCallback, useState } from 'react';
import { api, type CursorPage } from '../api/client';

/**
 * A cursor-paginated list (`{data, cursor, hasMore, total}`) paged forward and back: the cursors of
 * the pages seen are kept, since the service pages forward only. `total` comes with the first page.
 */
export function useCursorList<T>(key: readonly unknown[], path: string, query: Record<string, string | number | boolean | undefined>) {
  const [cursors, setCursors] = useState<string[]>([]);
  const [firstTotal, setFirstTotal] = useState<number | null>(null);
  const cursor = cursors[cursors.length - 1];
  // Stable, so a page can reset in an effect that runs when its filters change.
  const reset = useCallback(() => setCursors([]), []);
  const result = useQuery({
    queryKey: [...key, query, cursor ?? null],
    queryFn: async () => {
      const page = await api<CursorPage<T>>(path, { query: { ...query, cursor } });
      if (!cursor) setFirstTotal(page.total);
      return page;
    },
    placeholderData: keepPreviousData,
  });
  return {
    ...result,
    total: firstTotal,
    page: cursors.length + 1,
    next: () => result.data?.cursor && setCursors((c) => [...c, result.data!.cursor!]),
    previous: () => setCursors((c) => c.slice(0, -1)),
    reset,
    hasNext: Boolean(result.data?.hasMore && result.data.cursor),
    hasPrevious: cursors.length > 0,
  };
}

export function CursorPager({ list, label }: { list: ReturnType<typeof useCursorList<unknown>>; label: string }) {
  return (
    <nav className="pager" aria-label={`${label} pages`}>
      <button type="button" onClick={list.previous} disabled={!list.hasPrevious || list.isFetching}>
        Previous
      </button>
      <span>
        Page {list.page}
        {list.total !== null ? ` · ${list.total.toLocaleString()} in all` : ''}
      </span>
      <button type="button" onClick={list.next} disabled={!list.hasNext || list.isFetching}>
        Next
      </button>
    </nav>
  );
}
