package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// browser is one headless Chromium (Debian's chromium package) driven
// over the DevTools protocol, with what the page said to its console and
// any dialog it opened recorded for the checks.
type browser struct {
	t   testing.TB
	ctx context.Context

	mu      sync.Mutex
	dialogs []string
	console []string
}

// chromiumPath finds the browser; its absence fails the test (scripts/deps.sh
// installs it), it never skips.
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: run scripts/deps.sh (Debian: apt-get install chromium)")
	return ""
}

// newBrowser starts Chromium with a fresh profile and no network of its
// own beyond what the page asks for; it is stopped in t.Cleanup.
func newBrowser(t testing.TB) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{t: t}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(b.record))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser with the context's lifetime
		t.Fatalf("start chromium: %v", err)
	}
	b.ctx = ctx
	go func() { // the page's console and uncaught exceptions, for failures
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m.String())
			b.mu.Unlock()
		}
	}()
	return b
}

// consoleLines is what the page wrote to its console so far.
func (b *browser) consoleLines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.console...)
}

// record keeps dialogs (a payload's alert) and console messages.
func (b *browser) record(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *page.EventJavascriptDialogOpening:
		b.dialogs = append(b.dialogs, string(e.Type)+": "+e.Message)
	}
}

func (b *browser) dialogsOpened() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// do runs steps with a bound, failing the test.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v (dialogs: %v)", what, err, b.dialogsOpened())
	}
}

// eval evaluates a JS expression in the page into T.
func eval[T any](b *browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// waitJS polls expr in the page until it is true: the page updates by
// itself (no reload), so the test waits as a person watching would.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ok, err := eval[bool](b, "Boolean("+expr+")")
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	text, _ := eval[string](b, "document.body.innerText")
	b.t.Fatalf("timed out waiting for %s (%s): last error %v; console: %q; page text:\n%.3000s", what, expr, last, b.consoleLines(), text)
}

// text returns the text of the first element matching a CSS selector.
func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := eval[string](b, "(document.querySelector("+jsString(sel)+")||{}).textContent||''")
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// screenshot writes the window (1280x1000, what a person sees first) as
// a PNG into the artifacts directory.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(artifactsDir(b.t), name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", p)
}

var (
	artifactsOnce sync.Once
	artifacts     string
)

// artifactsDir is $RECONCILER_ARTIFACTS/console, or a directory under the
// system's temp dir that outlives the test (it is named in the log).
func artifactsDir(t testing.TB) string {
	artifactsOnce.Do(func() {
		root := os.Getenv("RECONCILER_ARTIFACTS")
		if root == "" {
			dir, err := os.MkdirTemp("", "reconciler-console-artifacts-")
			if err != nil {
				t.Fatal(err)
			}
			artifacts = dir
			return
		}
		artifacts = filepath.Join(root, "console")
		if err := os.MkdirAll(artifacts, 0o755); err != nil {
			t.Fatal(err)
		}
	})
	return artifacts
}

// jsString quotes s as a JS string literal.
func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "<", `\x3c`)
	return `"` + r.Replace(s) + `"`
}
