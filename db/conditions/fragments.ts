/** SQL text with its `?` bindings; template literals below never contain a bare `?` of their own. */
export class Sql {
  constructor(
    readonly sql: string,
    readonly params: readonly unknown[],
  ) {}
}

/** Interpolated Sql is inlined; any other value becomes a `?` binding. */
export function sql(strings: TemplateStringsArray, ...values: unknown[]): Sql {
  let text = strings[0]!;
  const params: unknown[] = [];
  values.forEach((v, i) => {
    if (v instanceof Sql) {
      text += v.sql;
      params.push(...v.params);
    } else {
      text += '?';
      params.push(v);
    }
    text += strings[i + 1]!;
  });
  return new Sql(text, params);
}

export const raw = (text: string) => new Sql(text, []);
export const TRUE = raw('true');
export const FALSE = raw('false');

export function joinSql(parts: Sql[], separator: string): Sql {
  return new Sql(
    parts.map((p) => p.sql).join(separator),
    parts.flatMap((p) => p.params),
  );
}
