// Built by `make console` (`npx vite build console`) into console/dist, which the service serves at
// /console (src/http/console.ts). No CDN: everything is bundled.
import { defineConfig } from 'vite';
import preact from '@preact/preset-vite';

export default defineConfig({
  base: '/console/',
  plugins: [preact()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false, modulePreload: { polyfill: false } },
  server: { fs: { allow: ['..'] } },
});
