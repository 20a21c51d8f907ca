/// <reference types="vitest" />
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The build goes into the Python package, which serves it at "/" (sleuth serve).
export default defineConfig({
  plugins: [react()],
  base: "/",
  build: {
    outDir: "../src/sleuth/web/static",
    emptyOutDir: true,
    assetsDir: "assets",
    sourcemap: false,
  },
  server: {
    proxy: {
      "/agent": "http://127.0.0.1:8000",
      "/collections": "http://127.0.0.1:8000",
      "/health": "http://127.0.0.1:8000",
      "/threads": "http://127.0.0.1:8000",
    },
  },
  test: {
    environment: "jsdom",
    include: ["src/**/*.test.{ts,tsx}"],
  },
});
