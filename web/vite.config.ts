import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

/**
 * The dashboard is served by the API at /app from dist/web (api/web-app.ts), so the build is part of
 * `npm run build` and nothing is fetched from elsewhere at run time. `npm run dev:web` proxies the API.
 */
export default defineConfig({
  root,
  base: '/app/',
  // JSX is compiled by Vite's own transformer (the automatic runtime); no plugin is needed to build.
  oxc: { jsx: { runtime: 'automatic' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/web', import.meta.url)),
    emptyOutDir: true,
    // The sign-in page is the first page; every other page is its own chunk, loaded when opened.
    chunkSizeWarningLimit: 600,
    rolldownOptions: {
      // Libraries mark their modules "use client" for server components; a browser bundle has no use for it.
      onwarn(warning, warn) {
        if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') warn(warning);
      },
    },
  },
  server: {
    proxy: Object.fromEntries(
      ['/v1', '/auth', '/users', '/projects', '/contacts', '/templates', '/campaigns', '/segments', '/workflows', '/events', '/domains', '/activity', '/analytics', '/uploads', '/config', '/emails', '/outbox'].map(
        (path) => [path, process.env.TIDINGS_API ?? 'http://127.0.0.1:3000'],
      ),
    ),
  },
});
