// disposable-email-domains ships JSON and plain CommonJS files without type declarations.

/** Domains whose addresses are disposable (exact match on the address's domain). */
declare module 'disposable-email-domains' {
  const domains: string[];
  export = domains;
}

/** Domains every subdomain of which is disposable (`x@anything.<domain>`). */
declare module 'disposable-email-domains/wildcard' {
  const domains: string[];
  export = domains;
}
