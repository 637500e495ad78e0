// The opsight web UI: built into dist/ (served by `opsight ui`, installed with the Python
// package as opsight/web/). Relative asset paths so the app works under any mount point.
import { defineConfig } from "vitest/config";

export default defineConfig({
  base: "./",
  build: { outDir: "dist", emptyOutDir: true, sourcemap: false, chunkSizeWarningLimit: 1024 },
  // The metric names' test reads the recorder's source (src/collect/) to check its table.
  server: { fs: { allow: [".", "../src/collect"] } },
  test: { environment: "jsdom", include: ["src/**/*.test.ts"] },
});
