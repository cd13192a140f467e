// The web chat's build: one script (app.js) and one stylesheet (style.css) with stable names,
// written into the Python package so that installing vigil needs no Node.
import { defineConfig } from "vite";

export const OUT_DIR = "../src/vigil/gateway/adapters/web/ui";

export default defineConfig({
  base: "/static/",
  publicDir: "public",
  build: {
    outDir: OUT_DIR,
    emptyOutDir: true,
    assetsDir: "",
    target: "es2020",
    cssCodeSplit: false,
    modulePreload: false,
    reportCompressedSize: true,
    rollupOptions: {
      input: "src/main.js",
      output: {
        entryFileNames: "app.js",
        assetFileNames: (asset) => ((asset.names || [asset.name]).some((n) => n && n.endsWith(".css")) ? "style.css" : "[name][extname]"),
        inlineDynamicImports: true,
      },
    },
  },
  test: {
    environment: "jsdom",
    include: ["test/**/*.test.js"],
  },
});
