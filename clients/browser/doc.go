// Package browser holds the operator console's browser tests: they build
// the genway binary, start `genway serve` on loopback with a fresh data
// directory, and drive headless Chromium through the console with
// chromedp (sign in, keys, credits, jobs, usage, the requests and one's
// charge, the playground: a chat whose answer must grow on the page as it
// streams, an sfx job that must
// load, a video job that must play; images that must decode at the size
// asked for, and speech that must play as it streams, through
// MediaSource), saving a screenshot of every page and measuring each
// page's weight and first render. It is a module of its own so that the
// main module does not depend on chromedp.
//
// The server runs this checkout's catalog with one change: the chat model
// the test streams from, synthetic/thinker, is paced (the catalog's
// tokens_per_second), so that its answer arrives in pieces as a real
// model's does. The test calls no experimental DevTools protocol method or
// parameter of its own, so that a new Chromium does not break it, and logs
// the browser's version.
//
// Run with: cd clients/browser && go test -count=1 ./...
// (GENWAY_SCREENSHOTS=dir keeps the screenshots there; else they go to
// the test's artifact directory: go test -artifacts keeps them.)
package browser
