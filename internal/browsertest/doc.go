// Package browsertest drives headless Chromium (Debian's chromium) for
// the dashboard's browser tests: it skips cleanly where no Chromium is
// installed, collects the page's console errors (a CSP refusal shows
// there) and writes screenshots as test artifacts.
package browsertest
