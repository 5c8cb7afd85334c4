#!/usr/bin/env bash
# Install htmx and KaTeX from npm (pinned by package-lock.json) and copy the files the pages
# load into static/vendor/. KaTeX's CSS finds its fonts at fonts/ beside it: keep that layout.
set -euo pipefail
cd "$(dirname "$0")/.."

npm ci --no-audit --no-fund --ignore-scripts

vendor=static/vendor
katex=node_modules/katex/dist

rm -rf "$vendor"
mkdir -p "$vendor/katex"
cp node_modules/htmx.org/dist/htmx.min.js "$vendor/htmx.min.js"
cp "$katex/katex.min.js" "$katex/katex.min.css" "$katex/contrib/auto-render.min.js" \
    "$vendor/katex/"
cp -R "$katex/fonts" "$vendor/katex/fonts"
echo "vendor files installed in $vendor"
