import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Response } from 'express';

/**
 * The reference at /docs: Swagger UI from the installed `swagger-ui-dist` package, never a CDN, so
 * it works offline and always matches the package the lock file pins.
 */
const SWAGGER_UI_DIR = path.dirname(require.resolve('swagger-ui-dist/package.json'));
const SWAGGER_UI_VERSION = (JSON.parse(readFileSync(path.join(SWAGGER_UI_DIR, 'package.json'), 'utf8')) as { version: string }).version;

/** The files the page loads; nothing else in the package directory is served. */
export const DOCS_ASSETS = ['swagger-ui-bundle.js', 'swagger-ui.css', 'favicon-32x32.png'] as const;

const isAsset = (file: string): file is (typeof DOCS_ASSETS)[number] => (DOCS_ASSETS as readonly string[]).includes(file);

// The package version in the URL makes each file's content fixed for its URL, so it may be cached for good.
const assetUrl = (file: (typeof DOCS_ASSETS)[number]) => `/docs/assets/${file}?v=${SWAGGER_UI_VERSION}`;

/** Sends one of DOCS_ASSETS (false: not one of them), cacheable for a year. */
export function sendDocsAsset(res: Response, file: string): Promise<boolean> {
  if (!isAsset(file)) return Promise.resolve(false);
  return new Promise((resolve, reject) => {
    res.sendFile(path.join(SWAGGER_UI_DIR, file), { maxAge: '365d', immutable: true }, (err) => {
      if (!err || res.headersSent) resolve(true);
      else reject(err);
    });
  });
}

/** The page: Swagger UI pointed at /openapi.json. Its init has to be an inline script. */
export function renderDocsPage(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tidings API reference</title>
<link rel="icon" type="image/png" href="${assetUrl('favicon-32x32.png')}">
<link rel="stylesheet" href="${assetUrl('swagger-ui.css')}">
<style>body{margin:0}</style>
</head>
<body>
<noscript><p>This reference needs JavaScript. The API is described in <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).</p></noscript>
<div id="swagger-ui"></div>
<script src="${assetUrl('swagger-ui-bundle.js')}"></script>
<script>
window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  filter: true,
  displayRequestDuration: true,
  defaultModelsExpandDepth: 0,
  // The default would send the document to validator.swagger.io for a badge.
  validatorUrl: null,
});
</script>
</body>
</html>
`;
}
