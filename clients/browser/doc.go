// Package browser holds the operator console's browser tests: they build
// the genway binary, start `genway serve` on loopback with a fresh data
// directory, and drive headless Chromium through the console with
// chromedp (sign in, keys, credits, jobs, usage, the playground), saving a
// screenshot of every page and measuring each page's weight and first
// render. It is a module of its own so that the main module does not
// depend on chromedp.
//
// Run with: cd clients/browser && go test -count=1 ./...
// (GENWAY_SCREENSHOTS=dir keeps the screenshots there; else they go to
// the test's artifact directory: go test -artifacts keeps them.)
package browser
