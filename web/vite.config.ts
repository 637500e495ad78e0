// The opsight web UI: built into dist/ (served by `opsight ui`, installed with the Python
// package as opsight/web/). Relative asset paths so the app works under any mount point.
import { defineConfig } from "vitest/config";

export default defineConfig({
  base: "./",
  build: { outDir: "dist", emptyOutDir: true, sourcemap: false, chunkSizeWarningLimit: 1024 },
  // Tests read files outside web/: the metric names' test the recorder's source
  // (src/collect/), the API types' test docs/ui-openapi.json.
  server: { fs: { allow: [".", "../src/collect", "../docs"] } },
  test: { environment: "jsdom", include: ["src/**/*.test.ts"] },
});
